import Foundation
import Testing

/// The code's layering as docs/architecture.md draws it, checked on the sources (issue 34).
@Suite("layering: what each part may import")
struct LayeringTests {
    /// The modules a file imports (`import X`, `@_exported import X`).
    static func imports(_ file: URL) throws -> Set<String> {
        let text = try String(contentsOf: file, encoding: .utf8)
        var modules: Set<String> = []
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ")
            guard let i = words.firstIndex(of: "import"), i + 1 < words.count,
                  words[..<i].allSatisfy({ $0.hasPrefix("@") }) else { continue }
            modules.insert(String(words[i + 1]))
        }
        return modules
    }

    static func swiftFiles(_ folder: String) throws -> [URL] {
        let directory = repositoryRoot.appendingPathComponent(folder)
        return try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "swift" }.sorted { $0.path < $1.path }
    }

    @Test("the node's pure step (Sources/ProximityNode/Step) imports the domain, the trust primitives, the API's values and logging: no bus, no BlueZ, no MQTT")
    func stepImports() throws {
        let allowed: Set<String> = ["Foundation", "Logging", "ProximityCore", "ProximityTrust", "ProximityAPIValues"]
        let files = try Self.swiftFiles("Sources/ProximityNode/Step")
        #expect(files.count >= 10)
        for file in files {
            let extra = try Self.imports(file).subtracting(allowed)
            #expect(extra.isEmpty, "\(file.lastPathComponent) imports \(extra.sorted())")
        }
    }

    @Test("the API's values (Sources/ProximityAPIValues) know no bus; ProximityMQTT links no MQTT client")
    func valuesImports() throws {
        for file in try Self.swiftFiles("Sources/ProximityAPIValues") {
            let extra = try Self.imports(file).subtracting(["Foundation", "ProximityCore"])
            #expect(extra.isEmpty, "\(file.lastPathComponent) imports \(extra.sorted())")
        }
        for file in try Self.swiftFiles("Sources/ProximityMQTT") {
            let extra = try Self.imports(file).subtracting(["Foundation", "ProximityCore"])
            #expect(extra.isEmpty, "\(file.lastPathComponent) imports \(extra.sorted())")
        }
    }

    @Test("the simulator (Tools/BlueZSim, Tools/bluez-sim) links none of the node: no ProximityTrust, ProximityNode, ProximityAPI or ProximityCore; Package.swift agrees")
    func simulatorImports() throws {
        let node: Set<String> = ["ProximityTrust", "ProximityNode", "ProximityAPI", "ProximityAPIValues", "ProximityCore"]
        for folder in ["Tools/BlueZSim", "Tools/bluez-sim"] {
            for file in try Self.swiftFiles(folder) {
                let found = try Self.imports(file).intersection(node)
                #expect(found.isEmpty, "\(folder)/\(file.lastPathComponent) imports \(found.sorted())")
            }
        }
        // The target's dependencies too: a module linked but not imported is still linked.
        let package = try String(contentsOf: repositoryRoot.appendingPathComponent("Package.swift"), encoding: .utf8)
        let start = try #require(package.range(of: "name: \"BlueZSim\",")).upperBound
        let end = try #require(package.range(of: "path: \"Tools/BlueZSim\"", range: start..<package.endIndex)).lowerBound
        let declaration = package[start..<end]
        for module in node { #expect(!declaration.contains("\"\(module)\""), "BlueZSim depends on \(module)") }
    }

    /// ProximityNode's folders, each allowed to use the types of those before it only: the data
    /// flows one way (docs/architecture.md's map), no folder loop.
    static let folderOrder = ["Clock", "Trust", "Identification", "Configuration", "Step", "State", "Link", "Engine", "Export",
                              "Publishing", "Daemon"]

    @Test("ProximityNode's folders use only the types of the folders below them (Clock, Trust, Identification, Configuration, Step, State, Link, Engine, Export, Publishing, Daemon): no loop")
    func folderOrder() throws {
        let root = repositoryRoot.appendingPathComponent("Sources/ProximityNode")
        let folders = try FileManager.default.contentsOfDirectory(atPath: root.path).filter { !$0.hasPrefix(".") }.sorted()
        #expect(folders == Self.folderOrder.sorted(), "a folder is not in the order: \(folders)")
        // Which folder declares each top-level type (a line that starts with its declaration).
        let declaration = try Regex(#"^(?:public |final |@\w+ )*(?:struct|enum|class|actor|protocol|typealias) +(\w+)"#).anchorsMatchLineEndings()
        var owner: [String: String] = [:]
        var texts: [(folder: String, file: String, text: String)] = []
        for folder in Self.folderOrder {
            for file in try Self.swiftFiles("Sources/ProximityNode/\(folder)") {
                let text = try String(contentsOf: file, encoding: .utf8)
                texts.append((folder, file.lastPathComponent, text))
                for match in text.matches(of: declaration) {
                    if let name = match.output[1].substring.map(String.init), owner[name] == nil { owner[name] = folder }
                }
            }
        }
        #expect(owner.count > 50, "\(owner.count) types found")
        // A capitalised word not after a dot (a member) nor inside another word.
        let word = try Regex(#"(?:^|[^.\w])([A-Z]\w+)"#).anchorsMatchLineEndings()
        for (folder, file, text) in texts {
            let rank = Self.folderOrder.firstIndex(of: folder)!
            // Comments and string literals do not count.
            let code = text.split(separator: "\n").map { line in
                line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            }.joined(separator: "\n").replacing(try Regex(#""[^"\n]*""#), with: "")
            let above = Set(code.matches(of: word).compactMap { match -> String? in
                guard let name = match.output[1].substring.map(String.init) else { return nil }
                guard let other = owner[name], let otherRank = Self.folderOrder.firstIndex(of: other), otherRank > rank else { return nil }
                return "\(name) (\(other))"
            })
            #expect(above.isEmpty, "\(folder)/\(file) uses \(above.sorted()) from above it")
        }
    }
}
