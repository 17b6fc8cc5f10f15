import DBusKit
import Foundation
import ProximityTesting
import Synchronization
import Testing

/// Methods with typed arguments: the signature comes from the Swift types, the handler gets
/// Swift values, and a dictionary's repeated key reaches the handler.
@Suite("Typed methods")
struct TypedMethodTests {
    @Test("the declared signature follows the argument types; the handler gets the values; a repeated key is kept for the handler to refuse")
    func typed() async throws {
        try await withBusPair { _, server, client in
            _ = try await server.export([DBusInterface(testInterface, methods: [
                DBusMethod("Describe", DBusIn("name", String.self), DBusIn("power", Int16.self), DBusIn("options", DBusVardict.self),
                           outputs: [DBusArgument("text", .string)]) { _, name, power, options in
                    if let key = options.repeatedKey { throw DBusError("org.proximityd.Error.InvalidArguments", "\(key) is given twice") }
                    let keys = options.dictionary.keys.sorted().joined(separator: ",")
                    return [.string("\(name) \(power) \(keys) \(options.dictionary["level"]?.integer ?? -1)")]
                },
                DBusMethod("Nothing") { _ in [] },
            ])], at: "/test/typed")
            let method = try #require(try await client.call(destination: server.uniqueName, path: "/test/typed", interface: .introspectable,
                                                            member: "Introspect").first?.string)
            #expect(method.contains(#"<arg name="name" type="s" direction="in"/>"#) && method.contains(#"<arg name="power" type="n" direction="in"/>"#)
                    && method.contains(#"<arg name="options" type="a{sv}" direction="in"/>"#), "\(method)")
            let answer = try await client.call(destination: server.uniqueName, path: "/test/typed", interface: testInterface, member: "Describe",
                                               [.string("tag"), .int16(-59), .vardict(["level": .uint32(3), "mode": .string("x")])])
            #expect(answer.first?.string == "tag -59 level,mode 3")
            let twice = DBusValue.dictionary(key: .string, value: .variant, [.init(.string("a"), .variant(.int32(1))), .init(.string("a"), .variant(.int32(2)))])
            do {
                _ = try await client.call(destination: server.uniqueName, path: "/test/typed", interface: testInterface, member: "Describe",
                                          [.string("tag"), .int16(0), twice])
                Issue.record("a repeated key was accepted")
            } catch let error as DBusError {
                #expect(error.message == "a is given twice", "\(error)")
            }
            do {
                _ = try await client.call(destination: server.uniqueName, path: "/test/typed", interface: testInterface, member: "Describe",
                                          [.string("tag"), .int32(0), .vardict([:])])
                Issue.record("a wrong signature was accepted")
            } catch let error as DBusError {
                #expect(error.name.rawValue == "org.freedesktop.DBus.Error.InvalidArgs", "\(error)")
            }
        }
    }

    @Test("a call over DBusReceiveLimits.methodCall is answered LimitsExceeded and never reaches its handler; one at the limits does")
    func receiveLimits() async throws {
        try await withBusPair { _, server, client in
            let handled = Mutex(0)
            _ = try await server.export([DBusInterface(testInterface, methods: [
                DBusMethod("Count", DBusIn("names", [String].self), outputs: [DBusArgument("n", .uint32)]) { _, names in
                    handled.withLock { $0 += 1 }
                    return [.uint32(UInt32(names.count))]
                },
            ])], at: "/test/limits")
            let limits = DBusReceiveLimits.methodCall
            func count(_ names: [String]) async throws -> DBusValue? {
                try await client.call(destination: server.uniqueName, path: "/test/limits", interface: testInterface,
                                      member: "Count", [.strings(names)], timeout: .seconds(30)).first
            }
            // At the limits: the array and its elements are maxValues values; its strings maxStringBytes bytes.
            let most = limits.maxValues - 1
            #expect(try await count(Array(repeating: "", count: most)) == .uint32(UInt32(most)))
            #expect(try await count([String(repeating: "x", count: limits.maxStringBytes)]) == .uint32(1))
            #expect(handled.withLock { $0 } == 2)
            // One value more, one byte more, and the largest a bus takes: refused, the handler not called.
            for names in [Array(repeating: "", count: most + 1), [String(repeating: "x", count: limits.maxStringBytes + 1)],
                          Array(repeating: "ab", count: 2_000_000)] {
                do {
                    _ = try await count(names)
                    Issue.record("a call of \(names.count) names was answered")
                } catch let error as DBusError {
                    #expect(error.name == .limitsExceeded, "\(error)")
                    #expect(error.message.contains("65536 values"), "\(error.message)")
                }
            }
            #expect(handled.withLock { $0 } == 2)
            // The connection still serves calls.
            #expect(try await count(["a", "b"]) == .uint32(2))
        }
    }

    static let describe = DBusMethodSpec(testInterface, "Describe", DBusIn("name", String.self), DBusIn("power", Int16.self),
                                         reply: DBusOut("text", String.self))
    static let check = DBusMethodSpec(testInterface, "Check", DBusIn("names", [String].self),
                                      reply: DBusOut2("ok", Bool.self, "problems", [String].self))
    static let forget = DBusMethodSpec(testInterface, "Forget", DBusIn("name", String.self))
    /// Declared as answering a string; the exported one (a bad peer) answers a number.
    static let liar = DBusMethodSpec(testInterface, "Lie", reply: DBusOut("text", String.self))

    @Test("a method declared once (DBusMethodSpec): the exported side's introspection and the caller's values come from it; a reply of other types is refused")
    func declaredOnce() async throws {
        try await withBusPair { _, server, client in
            let forgotten = Mutex<[String]>([])
            _ = try await server.export([DBusInterface(testInterface, methods: [
                DBusMethod(Self.describe) { _, name, power in "\(name) \(power)" },
                DBusMethod(Self.check) { _, names in (names.allSatisfy { !$0.isEmpty }, names.filter(\.isEmpty).map { _ in "an empty name" }) },
                DBusMethod(Self.forget) { _, name in forgotten.withLock { $0.append(name) } },
                DBusMethod(Self.liar.name, outputs: [DBusArgument("text", .uint32)]) { _ in [.uint32(7)] },
            ])], at: "/test/spec")
            let xml = try #require(try await client.call(destination: server.uniqueName, path: "/test/spec", interface: .introspectable,
                                                         member: "Introspect").first?.string)
            let normalized = xml.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            #expect(normalized.contains(#"<method name="Check"> <arg name="names" type="as" direction="in"/> "#
                + #"<arg name="ok" type="b" direction="out"/> <arg name="problems" type="as" direction="out"/> </method>"#), "\(xml)")
            #expect(try await client.call(Self.describe, destination: server.uniqueName, path: "/test/spec", "tag", -59) == "tag -59")
            let (ok, problems) = try await client.call(Self.check, destination: server.uniqueName, path: "/test/spec", ["a", ""])
            #expect(!ok && problems == ["an empty name"])
            try await client.call(Self.forget, destination: server.uniqueName, path: "/test/spec", "x")
            #expect(forgotten.withLock { $0 } == ["x"])
            do {
                _ = try await client.call(Self.liar, destination: server.uniqueName, path: "/test/spec")
                Issue.record("a reply of the wrong type was accepted")
            } catch let error as DBusError {
                #expect(error.name == .invalidSignature && error.message.contains("is not 's' but 'u'"), "\(error)")
            }
        }
    }
}
