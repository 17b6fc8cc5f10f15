import DBusKit
import Foundation
import ProximityTesting
import Testing

/// Values of every D-Bus type, including the awkward ones: empty containers, nested variants,
/// extreme integers, `a{sv}` with `aay` inside.
let sampleValues: [DBusValue] = [
    .byte(0), .byte(255),
    .boolean(true), .boolean(false),
    .int16(.min), .int16(.max), .uint16(.max),
    .int32(.min), .int32(-1), .uint32(.max),
    .int64(.min), .int64(.max), .uint64(.max),
    .double(0), .double(-1.5e300), .double(.infinity), .double(.leastNonzeroMagnitude), .double(-0.0),
    .string(""), .string("héllo wörld ✓ \u{1F600}"), .string(String(repeating: "x", count: 70_000)),
    .objectPath("/"), .objectPath("/org/proximityd/peers/a_2d1"),
    .signature(""), .signature("a{sa{sv}}(yyy)ah"),
    .array(element: .string, []),
    .array(element: .array(.byte), []),
    .bytes([]), .bytes([0, 1, 2, 254, 255]), .bytes(Array(repeating: 7, count: 100_000)),
    .strings(["a", "", "c"]),
    .array(element: .array(.int32), [.array(element: .int32, [.int32(1)]), .array(element: .int32, [])]),
    .dictionary(key: .string, value: .variant, []),
    .vardict(["rssi": .int16(-60), "name": .string("box"), "blob": .array(element: .array(.byte), [.bytes([1, 2]), .bytes([])])]),
    .dictionary(key: .uint16, value: .array(.byte), [.init(.uint16(0x004C), .bytes([2, 21, 0xAA]))]),
    .dictionary(key: .objectPath, value: .dictionary(key: .string, value: .dictionary(key: .string, value: .variant)), []),
    .structure([.byte(1), .string("s"), .variant(.variant(.int32(3)))]),
    .structure([.structure([.boolean(true)]), .array(element: .structure([.string, .int32]), [])]),
    .variant(.variant(.variant(.string("deep")))),
    .variant(.vardict(["inner": .bytes([9, 9])])),
    .array(element: .variant, [.variant(.int32(1)), .variant(.string("two")), .variant(.strings([]))]),
]

@Suite("Round trips on a real private bus")
struct RoundTripTests {
    /// Our client sends the value to a method declared with exactly its type; the exported object
    /// returns it; what comes back is the same value.
    @Test("method argument and reply", arguments: sampleValues)
    func echoMethod(value: DBusValue) async throws {
        try await withBusPair { _, server, client in
            let interface = DBusInterface(testInterface, methods: [
                DBusMethod("Echo", inputs: [DBusArgument("value", value.type)], outputs: [DBusArgument("value", value.type)]) { call in
                    call.arguments
                },
            ])
            _ = try await server.export([interface], at: "/test/echo")
            let reply = try await client.call(destination: server.uniqueName, path: "/test/echo",
                                              interface: testInterface, member: "Echo", [value])
            #expect(reply == [value])
        }
    }

    /// The other direction: the exported object holds the value as a property; the client reads it
    /// with Get, and also receives it in a signal.
    @Test("property and signal", arguments: sampleValues)
    func propertyAndSignal(value: DBusValue) async throws {
        try await withBusPair { _, server, client in
            let interface = DBusInterface(testInterface, properties: [
                DBusProperty("Value", value.type, value),
            ], signals: [DBusSignal("Carried", arguments: [DBusArgument("value", value.type)])])
            let object = try await server.export([interface], at: "/test/holder")
            let got = try await client.getProperty(destination: server.uniqueName, path: "/test/holder",
                                                   interface: testInterface, name: "Value")
            #expect(got == value)
            let signals = try await client.subscribe(MatchRule(sender: server.uniqueName, interface: testInterface, member: "Carried"))
            try object.emit("Carried", interface: testInterface, [value])
            let message = try await next(signals)
            #expect(message.body == [value])
        }
    }

    @Test("unix file descriptors are passed and usable")
    func unixFD() async throws {
        try await withBusPair { _, server, client in
            let interface = DBusInterface(testInterface, methods: [
                DBusMethod("ReadAll", inputs: [DBusArgument("fd", .unixFD)], outputs: [DBusArgument("data", .string)]) { call in
                    guard case .unixFD(let fd) = call.arguments[0] else { return [.string("")] }
                    let handle = FileHandle(fileDescriptor: fd.duplicate(), closeOnDealloc: true)
                    let data = try handle.readToEnd() ?? Data()
                    return [.string(String(decoding: data, as: UTF8.self))]
                },
            ])
            _ = try await server.export([interface], at: "/test/fd")
            let pipe = Pipe()
            pipe.fileHandleForWriting.write(Data("through the pipe".utf8))
            try pipe.fileHandleForWriting.close()
            let fd = UnixFD(borrowing: pipe.fileHandleForReading.fileDescriptor)
            let reply = try await client.call(destination: server.uniqueName, path: "/test/fd",
                                              interface: testInterface, member: "ReadAll", [.unixFD(fd)])
            #expect(reply == [.string("through the pipe")])
        }
    }

    @Test("a malformed value is refused before it reaches libdbus")
    func malformedValue() async throws {
        try await withBusPair { _, server, client in
            let bad = DBusValue.array(element: .string, [.int32(1)])
            await #expect(throws: DBusError.self) {
                _ = try await client.call(destination: server.uniqueName, path: "/x", interface: testInterface,
                                          member: "Echo", [bad])
            }
            // The connection is still usable.
            let pong = try await client.call(destination: server.uniqueName, path: "/", interface: "org.freedesktop.DBus.Peer", member: "Ping")
            #expect(pong.isEmpty)
        }
    }
}
