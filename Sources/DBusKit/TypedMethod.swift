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
            var index = 0
            func decode<T: DBusRepresentable>(_ type: T.Type) throws(DBusError) -> T {
                defer { index += 1 }
                guard index < call.arguments.count, let value = T(dbusValue: call.arguments[index]) else {
                    throw DBusError(.invalidArgs, "argument \(index < names.count ? names[index] : "\(index)") is not '\(T.dbusType)'")
                }
                return value
            }
            let values = (repeat try decode((each A).self))
            return try await handler(call, repeat each values)
        }
    }
}

/// A dictionary with string keys (`a{sv}`, `a{ss}` …) exactly as it came: its entries in order,
/// a key given twice kept twice, so the handler refuses it by name rather than a dictionary
/// keeping one of the two silently.
public struct DBusEntries<Value: DBusRepresentable>: DBusRepresentable {
    public var entries: [(key: String, value: Value)]

    public init(_ entries: [(key: String, value: Value)]) { self.entries = entries }

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
