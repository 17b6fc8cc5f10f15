import Foundation
@testable import ProximityNode
import Testing

/// `dbus/org.proximityd.AlertStrategy1.xml` is implemented by clients, not by the node: what the
/// node checks is that a client's object declares it. The file must pass the node's own check
/// (the one `RegisterStrategy` runs on the caller's introspection data), and a wrong signature
/// must not.
@Suite("dbus/org.proximityd.AlertStrategy1.xml against RegisterStrategy's check")
struct StrategyIntrospectionTests {
    static let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("dbus/org.proximityd.AlertStrategy1.xml")

    @Test("the file declares Evaluate(a{oa{sv}}) -> a{ob} as RegisterStrategy wants it; other signatures and interfaces are refused")
    func declaresEvaluate() throws {
        let xml = try String(contentsOf: Self.file, encoding: .utf8)
        #expect(StrategyIntrospection.declaresEvaluate(xml))
        #expect(!StrategyIntrospection.declaresEvaluate(xml.replacingOccurrences(of: "type=\"a{ob}\"", with: "type=\"a{sb}\"")))
        #expect(!StrategyIntrospection.declaresEvaluate(xml.replacingOccurrences(of: "type=\"a{oa{sv}}\"", with: "type=\"a{sa{sv}}\"")))
        #expect(!StrategyIntrospection.declaresEvaluate(xml.replacingOccurrences(of: "org.proximityd.AlertStrategy1", with: "org.example.Strategy1")))
        #expect(!StrategyIntrospection.declaresEvaluate(xml.replacingOccurrences(of: "name=\"Evaluate\"", with: "name=\"Decide\"")))
    }
}
