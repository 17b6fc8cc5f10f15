/// Methods with typed arguments, in the spirit of zbus's `#[interface]`: the handler takes Swift
/// values, and the method's input signature comes from their types, so the declaration and the
/// handler cannot disagree.
///
/// ```swift
/// DBusMethod("StartMonitoring", DBusIn("identifier", String.self), DBusIn("matcher", DBusEntries.self)) { call, identifier, matcher in
///     …
///     return []
/// }
/// ```

/// An input argument of a method: its name, and its D-Bus type from the Swift type `T`.
public struct DBusIn<T: DBusRepresentable>: Sendable {
    public var name: String
    public var type: DBusType { T.dbusType }

    public init(_ name: String, _ type: T.Type = T.self) {
        self.name = name
    }
}

extension DBusMethod {
    /// A method whose handler takes its arguments as Swift values of the types `arguments` name.
    /// The bus checks a call's signature against the declared one before the handler runs; a
    /// value that still does not convert is refused with `InvalidArgs`.
    public init<each A: DBusRepresentable>(_ name: MemberName, _ arguments: repeat DBusIn<each A>, outputs: [DBusArgument] = [],
                                           handler: @escaping @Sendable (DBusMethodCall, repeat each A) async throws -> [DBusValue]) {
        var inputs: [DBusArgument] = []
        for argument in repeat each arguments { inputs.append(DBusArgument(argument.name, argument.type)) }
        let names = inputs.map(\.name)
        self.init(name, inputs: inputs, outputs: outputs) { call in
            let values: (repeat each A) = try decodeArguments(call.arguments, names: names)
            return try await handler(call, repeat each values)
        }
    }
}

/// A call's arguments as the Swift types `A…`, in order; `InvalidArgs` naming the first that
/// does not convert (`names`: the declared arguments' names).
func decodeArguments<each A: DBusRepresentable>(_ arguments: [DBusValue], names: [String]) throws(DBusError) -> (repeat each A) {
    var index = 0
    func next<T: DBusRepresentable>(_ type: T.Type) throws(DBusError) -> T {
        defer { index += 1 }
        guard index < arguments.count, let value = T(dbusValue: arguments[index]) else {
            throw DBusError(.invalidArgs, "argument \(index < names.count ? names[index] : "\(index)") is not '\(T.dbusType)'")
        }
        return value
    }
    return (repeat try next((each A).self))
}

/// A dictionary with string keys (`a{sv}`, `a{ss}` …) exactly as it came: its entries in order,
/// a key given twice kept twice, so the handler refuses it by name rather than a dictionary
/// keeping one of the two silently.
public struct DBusEntries<Value: DBusRepresentable>: DBusRepresentable {
    public var entries: [(key: String, value: Value)]

    public init(_ entries: [(key: String, value: Value)]) { self.entries = entries }

    /// A dictionary's entries, sorted by key (a call's arguments the same at each call).
    public init(_ dictionary: [String: Value]) {
        entries = dictionary.sorted { $0.key < $1.key }.map { (key: $0.key, value: $0.value) }
    }

    public static var dbusType: DBusType { .dictionary(key: .string, value: Value.dbusType) }

    public var dbusValue: DBusValue {
        .dictionary(key: .string, value: Value.dbusType, entries.map { .init(.string($0.key), $0.value.dbusValue) })
    }

    public init?(dbusValue value: DBusValue) {
        guard case .dictionary(.string, Value.dbusType, let items) = value else { return nil }
        var entries: [(key: String, value: Value)] = []
        entries.reserveCapacity(items.count)
        for item in items {
            guard let key = item.key.string, let value = Value(dbusValue: item.value) else { return nil }
            entries.append((key, value))
        }
        self.entries = entries
    }

    /// The first key given more than once, if any.
    public var repeatedKey: String? {
        var seen = Set<String>()
        return entries.first { !seen.insert($0.key).inserted }?.key
    }

    /// The entries as a dictionary (a repeated key: its last value; check ``repeatedKey`` first).
    public var dictionary: [String: Value] { Dictionary(entries.map { ($0.key, $0.value) }) { _, last in last } }
}

/// An `a{sv}` as it came.
public typealias DBusVardict = DBusEntries<DBusValue>

// MARK: - Methods declared once

/// What a method answers: its output arguments, and the Swift value they make.
public protocol DBusReply: Sendable {
    associatedtype Value: Sendable
    /// The output arguments, as the introspection declares them.
    var arguments: [DBusArgument] { get }
    /// The reply's body for `value`.
    func body(_ value: Value) -> [DBusValue]
    /// The value of a reply's body; nil when it does not have the declared types.
    func value(of body: [DBusValue]) -> Value?
}

/// A method that answers nothing: its handler returns `Void`.
public struct DBusNoReply: DBusReply {
    public init() {}
    public var arguments: [DBusArgument] { [] }
    public func body(_ value: Void) -> [DBusValue] { [] }
    public func value(of body: [DBusValue]) -> Void? { () }
}

/// A method that answers one value of the Swift type `T`.
public struct DBusOut<T: DBusRepresentable>: DBusReply {
    public var name: String
    public init(_ name: String, _ type: T.Type = T.self) { self.name = name }
    public var arguments: [DBusArgument] { [DBusArgument(name, T.dbusType)] }
    public func body(_ value: T) -> [DBusValue] { [value.dbusValue] }
    public func value(of body: [DBusValue]) -> T? { body.count == 1 ? T(dbusValue: body[0]) : nil }
}

/// A method that answers two values.
public struct DBusOut2<A: DBusRepresentable, B: DBusRepresentable>: DBusReply {
    public var names: (String, String)
    public init(_ first: String, _ a: A.Type = A.self, _ second: String, _ b: B.Type = B.self) { names = (first, second) }
    public var arguments: [DBusArgument] { [DBusArgument(names.0, A.dbusType), DBusArgument(names.1, B.dbusType)] }
    public func body(_ value: (A, B)) -> [DBusValue] { [value.0.dbusValue, value.1.dbusValue] }
    public func value(of body: [DBusValue]) -> (A, B)? {
        guard body.count == 2, let a = A(dbusValue: body[0]), let b = B(dbusValue: body[1]) else { return nil }
        return (a, b)
    }
}

/// A method that answers one value of a type Swift has no value type for here (a structure):
/// the ``DBusValue`` as it is, checked against `type`.
public struct DBusValueOut: DBusReply {
    public var name: String
    public var type: DBusType
    public init(_ name: String, _ type: DBusType) {
        self.name = name
        self.type = type
    }
    public var arguments: [DBusArgument] { [DBusArgument(name, type)] }
    public func body(_ value: DBusValue) -> [DBusValue] { [value] }
    public func value(of body: [DBusValue]) -> DBusValue? { body.count == 1 && body[0].type == type ? body[0] : nil }
}

/// One method of an interface, declared once: its interface, its name, its arguments' names and
/// Swift types, and its reply. The exporting side builds its ``DBusMethod`` (and so the
/// introspection) from it, the calling side calls it with ``DBusConnection/call(_:destination:path:_:timeout:)``:
/// the two ends cannot disagree on a name, an argument or a type.
///
/// ```swift
/// static let setPeerName = DBusMethodSpec(interface, "SetPeerName", DBusIn("identifier", String.self), DBusIn("name", String.self))
/// static let getPeer = DBusMethodSpec(interface, "GetPeer", DBusIn("identifier", String.self), reply: DBusOut("peer", ObjectPath.self))
/// ```
public struct DBusMethodSpec<each Input: DBusRepresentable, Reply: DBusReply>: Sendable, CustomStringConvertible {
    public let interface: InterfaceName
    public let name: MemberName
    public let inputs: [DBusArgument]
    public let reply: Reply

    public init(_ interface: InterfaceName, _ name: MemberName, _ arguments: repeat DBusIn<each Input>, reply: Reply) {
        var inputs: [DBusArgument] = []
        for argument in repeat each arguments { inputs.append(DBusArgument(argument.name, argument.type)) }
        self.interface = interface
        self.name = name
        self.inputs = inputs
        self.reply = reply
    }

    /// The interface and the member, as a bus policy or a match rule names them.
    public var member: (interface: InterfaceName, member: MemberName) { (interface, name) }

    /// The member's name (`SetPeerName`).
    public var description: String { name.rawValue }

    /// The arguments of a call, checked against the declared types.
    func decode(_ arguments: [DBusValue]) throws(DBusError) -> (repeat each Input) {
        try decodeArguments(arguments, names: inputs.map(\.name))
    }
}

extension DBusMethodSpec where Reply == DBusNoReply {
    /// A method that answers nothing.
    public init(_ interface: InterfaceName, _ name: MemberName, _ arguments: repeat DBusIn<each Input>) {
        self.init(interface, name, repeat each arguments, reply: DBusNoReply())
    }
}

extension DBusMethod {
    /// The exported side of `spec`: `handler` takes the arguments as Swift values and returns the
    /// reply's value. The bus checks a call's signature against the declared one before the
    /// handler runs; a value that still does not convert is refused with `InvalidArgs`.
    public init<each A: DBusRepresentable, R: DBusReply>(
        _ spec: DBusMethodSpec<repeat each A, R>, handler: @escaping @Sendable (DBusMethodCall, repeat each A) async throws -> R.Value
    ) {
        self.init(spec.name, inputs: spec.inputs, outputs: spec.reply.arguments) { call in
            let values = try spec.decode(call.arguments)
            return spec.reply.body(try await handler(call, repeat each values))
        }
    }
}

extension DBusConnection {
    /// Calls `spec` on `destination`'s object at `path` and returns its reply's value; a reply of
    /// other types than declared throws `InvalidSignature`.
    public func call<each A: DBusRepresentable, R: DBusReply>(_ spec: DBusMethodSpec<repeat each A, R>, destination: BusName?,
                                                              path: ObjectPath, _ arguments: repeat each A,
                                                              timeout: Duration = .seconds(25)) async throws -> R.Value {
        var values: [DBusValue] = []
        for argument in repeat each arguments { values.append(argument.dbusValue) }
        let body = try await call(destination: destination, path: path, interface: spec.interface, member: spec.name, values,
                                  timeout: timeout)
        guard let value = spec.reply.value(of: body) else {
            throw DBusError(.invalidSignature, "the reply to \(spec.interface).\(spec.name) is not " +
                            "'\(Signature(spec.reply.arguments.map(\.type)))' but '\(Signature(body.map(\.type)))'")
        }
        return value
    }
}
