/// Declarations of exported interfaces: one ``DBusInterface`` value declares an interface's
/// methods, properties and signals together (as zbus and sd-bus vtables do), and the introspection
/// XML is generated from it.

/// A named, typed argument of a method or signal.
public struct DBusArgument: Sendable, Hashable {
    public var name: String
    public var type: DBusType
    public init(_ name: String, _ type: DBusType) {
        self.name = name
        self.type = type
    }
}

/// What a method handler is given.
public struct DBusMethodCall: Sendable {
    public var sender: BusName?
    public var path: ObjectPath
    public var interface: InterfaceName
    public var member: MemberName
    public var arguments: [DBusValue]
}

public struct DBusMethod: Sendable {
    public typealias Handler = @Sendable (DBusMethodCall) async throws -> [DBusValue]
    public var name: MemberName
    public var inputs: [DBusArgument]
    public var outputs: [DBusArgument]
    public var handler: Handler

    public init(_ name: MemberName, inputs: [DBusArgument] = [], outputs: [DBusArgument] = [],
                handler: @escaping Handler) {
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.handler = handler
    }

    public var inputSignature: Signature { Signature(inputs.map(\.type)) }
    public var outputSignature: Signature { Signature(outputs.map(\.type)) }
}

public struct DBusProperty: Sendable {
    public enum Access: String, Sendable { case read, readWrite = "readwrite" }

    /// What a change emits (`org.freedesktop.DBus.Property.EmitsChangedSignal`).
    public enum ChangeSignal: String, Sendable {
        /// `PropertiesChanged` with the new value.
        case emits = "true"
        /// `PropertiesChanged` naming it in `invalidated_properties`.
        case invalidates
        /// Never changes while the object is exported.
        case const
        /// Changes without a signal; clients must poll.
        case none = "false"
    }

    /// Validates and applies a write from a client; returns the value to store (possibly
    /// normalised). Throw a ``DBusErrorConvertible`` to refuse it with a precise error.
    public typealias Setter = @Sendable (DBusValue) async throws -> DBusValue

    public var name: String
    public var type: DBusType
    public var access: Access
    public var changeSignal: ChangeSignal
    public var initialValue: DBusValue
    public var setter: Setter?

    /// A read-only property.
    public init(_ name: String, _ type: DBusType, _ value: DBusValue, changeSignal: ChangeSignal = .emits) {
        self.name = name
        self.type = type
        self.access = .read
        self.changeSignal = changeSignal
        self.initialValue = value
        self.setter = nil
    }

    /// A read-write property whose writes go through `setter`.
    public init(_ name: String, _ type: DBusType, _ value: DBusValue, changeSignal: ChangeSignal = .emits,
                setter: @escaping Setter) {
        self.name = name
        self.type = type
        self.access = .readWrite
        self.changeSignal = changeSignal
        self.initialValue = value
        self.setter = setter
    }
}

public struct DBusSignal: Sendable, Hashable {
    public var name: MemberName
    public var arguments: [DBusArgument]
    public init(_ name: MemberName, arguments: [DBusArgument] = []) {
        self.name = name
        self.arguments = arguments
    }
    public var signature: Signature { Signature(arguments.map(\.type)) }
}

/// One exported interface.
public struct DBusInterface: Sendable {
    public var name: InterfaceName
    public var methods: [DBusMethod]
    public var properties: [DBusProperty]
    public var signals: [DBusSignal]

    public init(_ name: InterfaceName, methods: [DBusMethod] = [], properties: [DBusProperty] = [],
                signals: [DBusSignal] = []) {
        // Declarations are our own code: a wrong one is a programmer error.
        for p in properties {
            precondition(p.initialValue.conforms(to: p.type),
                         "\(name).\(p.name): initial value \(p.initialValue) is not of type \(p.type)")
        }
        precondition(Set(methods.map(\.name)).count == methods.count, "\(name): duplicate method")
        precondition(Set(properties.map(\.name)).count == properties.count, "\(name): duplicate property")
        self.name = name
        self.methods = methods
        self.properties = properties
        self.signals = signals
    }

    func method(_ name: MemberName) -> DBusMethod? { methods.first { $0.name == name } }
    func property(_ name: String) -> DBusProperty? { properties.first { $0.name == name } }

    /// The `<interface>` element, indented by `indent` spaces.
    public func introspectionXML(indent: Int = 1) -> String {
        let pad = String(repeating: " ", count: indent)
        var x = "\(pad)<interface name=\"\(name)\">\n"
        for m in methods {
            if m.inputs.isEmpty && m.outputs.isEmpty {
                x += "\(pad) <method name=\"\(m.name)\"/>\n"
                continue
            }
            x += "\(pad) <method name=\"\(m.name)\">\n"
            for a in m.inputs { x += "\(pad)  <arg name=\"\(xmlEscape(a.name))\" type=\"\(a.type)\" direction=\"in\"/>\n" }
            for a in m.outputs { x += "\(pad)  <arg name=\"\(xmlEscape(a.name))\" type=\"\(a.type)\" direction=\"out\"/>\n" }
            x += "\(pad) </method>\n"
        }
        for s in signals {
            if s.arguments.isEmpty {
                x += "\(pad) <signal name=\"\(s.name)\"/>\n"
                continue
            }
            x += "\(pad) <signal name=\"\(s.name)\">\n"
            for a in s.arguments { x += "\(pad)  <arg name=\"\(xmlEscape(a.name))\" type=\"\(a.type)\"/>\n" }
            x += "\(pad) </signal>\n"
        }
        for p in properties {
            let head = "\(pad) <property name=\"\(xmlEscape(p.name))\" type=\"\(p.type)\" access=\"\(p.access.rawValue)\""
            if p.changeSignal == .emits {
                x += head + "/>\n"
            } else {
                x += head + ">\n"
                x += "\(pad)  <annotation name=\"org.freedesktop.DBus.Property.EmitsChangedSignal\" " +
                    "value=\"\(p.changeSignal.rawValue)\"/>\n"
                x += "\(pad) </property>\n"
            }
        }
        x += "\(pad)</interface>\n"
        return x
    }
}

func xmlEscape(_ s: String) -> String {
    var out = ""
    for c in s {
        switch c {
        case "&": out += "&amp;"
        case "<": out += "&lt;"
        case ">": out += "&gt;"
        case "\"": out += "&quot;"
        default: out.append(c)
        }
    }
    return out
}

/// The standard interfaces every exported object has, as they appear in introspection.
enum StandardInterfaces {
    static let introspectable = DBusInterface(.introspectable, methods: [
        DBusMethod("Introspect", outputs: [DBusArgument("xml_data", .string)]) { _ in [] },
    ])
    static let peer = DBusInterface(.peer, methods: [
        DBusMethod("Ping") { _ in [] },
        DBusMethod("GetMachineId", outputs: [DBusArgument("machine_uuid", .string)]) { _ in [] },
    ])
    static let properties = DBusInterface(.properties, methods: [
        DBusMethod("Get", inputs: [DBusArgument("interface_name", .string), DBusArgument("property_name", .string)],
                   outputs: [DBusArgument("value", .variant)]) { _ in [] },
        DBusMethod("GetAll", inputs: [DBusArgument("interface_name", .string)],
                   outputs: [DBusArgument("props", .dictionary(key: .string, value: .variant))]) { _ in [] },
        DBusMethod("Set", inputs: [DBusArgument("interface_name", .string), DBusArgument("property_name", .string),
                                   DBusArgument("value", .variant)]) { _ in [] },
    ], signals: [
        DBusSignal("PropertiesChanged", arguments: [
            DBusArgument("interface_name", .string),
            DBusArgument("changed_properties", .dictionary(key: .string, value: .variant)),
            DBusArgument("invalidated_properties", .array(.string)),
        ]),
    ])
    static let managedObjectsType = DBusType.dictionary(
        key: .objectPath, value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)))
    static let objectManager = DBusInterface(.objectManager, methods: [
        DBusMethod("GetManagedObjects", outputs: [DBusArgument("object_paths_interfaces_and_properties", managedObjectsType)]) { _ in [] },
    ], signals: [
        DBusSignal("InterfacesAdded", arguments: [
            DBusArgument("object_path", .objectPath),
            DBusArgument("interfaces_and_properties", .dictionary(key: .string, value: .dictionary(key: .string, value: .variant))),
        ]),
        DBusSignal("InterfacesRemoved", arguments: [
            DBusArgument("object_path", .objectPath),
            DBusArgument("interfaces", .array(.string)),
        ]),
    ])

    static let doctype = """
        <!DOCTYPE node PUBLIC "-//freedesktop//DTD D-BUS Object Introspection 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/introspect.dtd">

        """
}
