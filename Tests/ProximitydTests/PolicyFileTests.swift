import DBusKit
import Foundation
import ProximityAPI
import Testing

/// `dbus/org.proximityd.conf` against ProximityAPI's declaration of what everyone may call.
@Suite("the system bus policy")
struct PolicyFileTests {
    @Test("the default context allows exactly ProximityBus.methodsForEveryone of the node's interfaces, and denies every other method call")
    func everyoneMayCallTheDeclaredMethods() throws {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("dbus/org.proximityd.conf"), encoding: .utf8)
        let start = try #require(text.range(of: "<policy context=\"default\">"))
        let end = try #require(text.range(of: "</policy>", range: start.upperBound ..< text.endIndex))
        let policy = String(text[start.upperBound ..< end.lowerBound])
        #expect(policy.contains("<deny send_destination_prefix=\"org.proximityd\" send_type=\"method_call\"/>"))

        // Each <allow …/> element of the context, its attributes by name.
        var allowed = Set<String>()
        var scanner = policy[...]
        while let open = scanner.range(of: "<allow") {
            let close = try #require(scanner.range(of: "/>", range: open.upperBound ..< scanner.endIndex))
            let element = String(scanner[open.upperBound ..< close.lowerBound])
            scanner = scanner[close.upperBound...]
            var attributes: [String: String] = [:]
            for match in element.matches(of: /([a-z_]+)="([^"]*)"/) { attributes[String(match.1)] = String(match.2) }
            guard let interface = attributes["send_interface"], interface.hasPrefix("org.proximityd.") else { continue }
            #expect(attributes["send_destination_prefix"] == "org.proximityd", "\(element)")
            let member = try #require(attributes["send_member"], "an allow of a whole interface: \(element)")
            allowed.insert("\(interface).\(member)")
        }
        let declared = Set(ProximityBus.methodsForEveryone.map { "\($0.interface.rawValue).\($0.member.rawValue)" })
        #expect(allowed == declared, "in the file only: \(allowed.subtracting(declared).sorted()); declared only: \(declared.subtracting(allowed).sorted())")
        // The file's own summary names each of them.
        let comment = String(text[..<start.lowerBound])
        for method in ProximityBus.methodsForEveryone {
            #expect(comment.contains(method.member.rawValue), "the comment does not mention \(method.member.rawValue)")
        }
    }
}
