import Foundation
import ProximityCore
import Testing

/// `PeerID.formProblem`: the identifiers the node writes, and nothing else.
struct PeerIDFormTests {
    @Test(arguments: [
        "35b639de-a46c-45e4-8206-ab21ecfd26b3",
        "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2",
        "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:0:65535",
        "altbeacon:0118:f7826da6-4fa2-4e98-8024-bc5b71e0893e:7:42",
        "eddystone:00010203040506070809:0a0b0c0d0e0f",
        "eddystone-url:https://example.com/A,b",
    ])
    func accepted(_ identifier: String) {
        #expect(PeerID.formProblem(identifier) == nil)
        #expect(PeerID.canonical(identifier) == identifier)
    }

    @Test(arguments: [
        "", "nobody", "35B639DE-A46C-45E4-8206-AB21ECFD26B3", "35b639de-a46c-45e4-8206-ab21ecfd26b",
        "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1", "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:65536",
        "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:01:2", "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:+1:2",
        "ibeacon:F7826DA6-4FA2-4E98-8024-BC5B71E0893E:1:2", "altbeacon:118:f7826da6-4fa2-4e98-8024-bc5b71e0893e:7:42",
        "eddystone:0001020304050607080:0a0b0c0d0e0f", "eddystone:00010203040506070809:0A0B0C0D0E0F", "eddystone-url:",
        "node:35b639de-a46c-45e4-8206-ab21ecfd26b3", "a\u{1}b", String(repeating: "a", count: 256),
    ])
    func refused(_ identifier: String) {
        #expect(PeerID.formProblem(identifier) != nil, "\(identifier)")
    }

    @Test func canonicalLowersAllButAURL() {
        #expect(PeerID.canonical("IBEACON:F7826DA6-4FA2-4E98-8024-BC5B71E0893E:1:2") == "ibeacon:f7826da6-4fa2-4e98-8024-bc5b71e0893e:1:2")
        #expect(PeerID.canonical("eddystone-url:https://Example.com/A") == "eddystone-url:https://Example.com/A")
    }
}
