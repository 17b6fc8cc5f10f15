import DBusKit
import Testing

@Suite("Names and signatures (pure)")
struct NameAndSignatureTests {
    @Test("valid object paths", arguments: ["/", "/org", "/org/proximityd/peers/a_1", "/A/b9/_"])
    func validPaths(path: String) throws {
        #expect(try ObjectPath(path).rawValue == path)
    }

    @Test("invalid object paths are refused with the reason",
          arguments: ["", "org", "/org/", "//org", "/org//x", "/org/pro-x", "/é"])
    func invalidPaths(path: String) {
        #expect(throws: DBusNameError.self) { try ObjectPath(path) }
    }

    @Test("interface names", arguments: [
        ("org.proximityd.Node1", true), ("a.b", true), ("_a.b_2", true),
        ("org", false), ("org..x", false), ("org.1x", false), ("org.x-y", false), (".org.x", false),
        (String(repeating: "a.", count: 128) + "b", false),
    ])
    func interfaceNames(name: String, valid: Bool) {
        #expect(((try? InterfaceName(name)) != nil) == valid)
    }

    @Test("bus names", arguments: [
        (":1.42", true), (":1.0", true), ("org.proximityd", true), ("org.prox-imityd.hci0", true),
        ("org", false), ("1org.x", false), (":", false), ("org.", false),
    ])
    func busNames(name: String, valid: Bool) {
        #expect(((try? BusName(name)) != nil) == valid)
    }

    @Test("member names", arguments: [("GetPeers", true), ("_x1", true), ("1x", false), ("", false), ("a.b", false)])
    func memberNames(name: String, valid: Bool) {
        #expect(((try? MemberName(name)) != nil) == valid)
    }

    @Test("signatures parse and print back", arguments: [
        "", "y", "a{sv}", "a{oa{sa{sv}}}", "(ybnqiuxtdsogh)", "aay", "a(sa{qv})", "vvv", "a{qay}",
    ])
    func signatureRoundTrip(text: String) throws {
        let signature = try Signature(text)
        #expect(signature.rawValue == text)
        #expect(Signature(signature.types).rawValue == text)
    }

    @Test("bad signatures", arguments: [
        "a", "{sv}", "a{vs}", "a{s}", "a{sss}", "()", "(s", "z", "a{sv",
        String(repeating: "a", count: 33) + "y", String(repeating: "(", count: 33) + "y" + String(repeating: ")", count: 33),
    ])
    func badSignatures(text: String) {
        #expect(throws: DBusNameError.self) { try Signature(text) }
    }

    @Test("path escaping round-trips any string", arguments: ["hci0", "", "AA:BB:CC", "ünï cödé", "_x", "9lives"])
    func escaping(element: String) {
        let path = ObjectPath.root.appending(escaped: "peers").appending(escaped: element)
        #expect((try? ObjectPath(path.rawValue)) != nil)
        #expect(path.decodedLastElement == element)
    }

    @Test("values check their own types")
    func conformance() {
        #expect(DBusValue.strings(["a"]).conforms(to: .array(.string)))
        #expect(!DBusValue.array(element: .string, [.int32(1)]).conforms(to: .array(.string)))
        #expect(!DBusValue.dictionary(key: .variant, value: .string, []).conforms(to: .dictionary(key: .variant, value: .string)))
        #expect(!DBusValue.structure([]).conforms(to: .structure([])))
        #expect(DBusValue.vardict(["a": .bytes([1])]).type == .dictionary(key: .string, value: .variant))
    }

    @Test("Swift types convert both ways")
    func representable() {
        let dict: [String: [UInt8]] = ["a": [1, 2], "b": []]
        #expect([String: [UInt8]](dbusValue: dict.dbusValue) == dict)
        #expect([String: [UInt8]].dbusType.description == "a{say}")
        #expect(Int32(dbusValue: .int16(3)) == nil)
        #expect([ObjectPath](dbusValue: .array(element: .objectPath, [.objectPath("/a")])) == ["/a"])
    }
}
