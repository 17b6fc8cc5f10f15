import Foundation
import LibCrypto
import StrictYAML

// MARK: - Reading a parsed document into a Scenario

/// Reads a scenario's ``YAMLNode`` tree (from YAML through StrictYAML, or from JSON through
/// ``ScenarioJSONReader``) into a ``Scenario``: shapes, types, unknown keys and per-field ranges.
/// It is a ``YAMLReading``, as the config file's and the floor plan's readers are: the same rules
/// and words for mappings, keys, strings and numbers. A scenario stops at its first problem, with
/// its path (``ScenarioError``). Cross-field rules are ``Scenario/validate()``'s; the decoder
/// keeps the place of every path it visits so those errors get a line and column too.
struct ScenarioDecoder: YAMLReading {
    var problems: [YAMLProblem] = []
    private var places: [String: ScenarioPlace] = [:]

    /// The document of `bytes` as a tree: YAML's problems (syntax, duplicate keys are the
    /// reader's, limits) or JSON's, the first one thrown.
    static func document(_ bytes: [UInt8], format: ScenarioFormat) throws(ScenarioError) -> YAMLNode {
        switch format {
        case .json:
            var reader = ScenarioJSONReader(bytes)
            return try reader.document()
        case .yaml:
            let (root, problems) = StrictYAML.parse(bytes)
            if let problem = problems.min(by: { ($0.position ?? .init(line: 0, column: 0)) < ($1.position ?? .init(line: 0, column: 0)) }) {
                throw ScenarioError(path: "", message: problem.message).at(problem.position.map(ScenarioPlace.init))
            }
            guard let root, !root.isNull else { throw ScenarioError(path: "", message: "the scenario is empty") }
            return root
        }
    }

    /// The place of `path`, or of its nearest ancestor the decoder saw.
    func place(for path: String) -> ScenarioPlace? {
        var path = Substring(path)
        while true {
            if let place = places[String(path)] { return place }
            guard let cut = path.lastIndex(where: { $0 == "." || $0 == "[" }) else { return nil }
            path = path[..<cut]
        }
    }

    private func error(_ path: String, _ message: String, _ node: YAMLNode) -> ScenarioError {
        ScenarioError(path: path, message: message).at(ScenarioPlace(node.position))
    }

    private static func join(_ path: String, _ key: String) -> String {
        ScenarioError.join(path, key)
    }

    /// `value`, when nothing was reported; otherwise the first problem, as the scenario's error.
    /// (Mutating: so it reads the problems after its argument, a reading, has reported them.)
    private mutating func need<T>(_ value: T?) throws(ScenarioError) -> T {
        if let problem = problems.first {
            throw ScenarioError(path: problem.path ?? "", message: problem.path == nil ? problem.message : problem.detail)
                .at(problem.position.map(ScenarioPlace.init))
        }
        guard let value else { throw ScenarioError(path: "", message: "unreadable") }
        return value
    }

    // MARK: Shapes and scalars (YAMLReading's, stopping at the first problem)

    /// A mapping whose keys are all in `keys`; returns the values by key.
    private mutating func object(_ node: YAMLNode, _ path: String, keys: [String]) throws(ScenarioError) -> [String: YAMLNode] {
        places[path] = ScenarioPlace(node.position)
        var result: [String: YAMLNode] = [:]
        for entry in try need(mapping(node, path: path, keys: keys)) {
            result[entry.key] = entry.value
            places[Self.join(path, entry.key)] = ScenarioPlace(entry.value.position)
        }
        return result
    }

    private func required(_ object: [String: YAMLNode], _ key: String, in path: String,
                          _ parent: YAMLNode) throws(ScenarioError) -> YAMLNode {
        guard let value = object[key] else { throw error(Self.join(path, key), "missing", parent) }
        return value
    }

    private mutating func list(_ node: YAMLNode, _ path: String) throws(ScenarioError) -> [YAMLNode] {
        places[path] = ScenarioPlace(node.position)
        let items = try need(sequence(node, path: path, max: YAMLLimits.maxValues, holder: "a scenario"))
        for (i, item) in items.enumerated() { places["\(path)[\(i)]"] = ScenarioPlace(item.position) }
        return items
    }

    /// A string; any unquoted scalar but null counts as its text, so an unquoted address that
    /// YAML 1.1 would read as a sexagesimal number still works.
    private mutating func string(_ node: YAMLNode, _ path: String) throws(ScenarioError) -> String {
        try need(string(node, path: path))
    }

    /// The finite number under `key` of an object's `fields`, or nil when the key is absent.
    private mutating func optionalNumber(_ fields: [String: YAMLNode], _ key: String, _ path: String) throws(ScenarioError) -> Double? {
        guard let value = fields[key] else { return nil }
        return try number(value, Self.join(path, key))
    }

    private mutating func number(_ node: YAMLNode, _ path: String) throws(ScenarioError) -> Double {
        try need(number(node, path: path))
    }

    /// A whole number that fits `T`.
    private mutating func integer<T: FixedWidthInteger>(_ node: YAMLNode, _ path: String, as type: T.Type) throws(ScenarioError) -> T {
        try need(integer(node, path: path, as: T.self))
    }

    private mutating func uuid(_ node: YAMLNode, _ path: String) throws(ScenarioError) -> UUID {
        let text = try string(node, path)
        guard let uuid = UUID(uuidString: text) else {
            throw error(path, "\"\(text)\" is not a UUID (8-4-4-4-12 hex digits)", node)
        }
        return uuid
    }

    private mutating func hexBytes(_ node: YAMLNode, _ path: String, count: Int) throws(ScenarioError) -> [UInt8] {
        let text = try string(node, path)
        guard let bytes = BeaconFrame.bytes(fromHex: text), bytes.count == count else {
            throw error(path, "must be \(count) bytes as \(2 * count) hex digits, not \"\(text)\"", node)
        }
        return bytes
    }

    // MARK: The scenario

    mutating func scenario(_ root: YAMLNode) throws(ScenarioError) -> Scenario {
        let fields = try object(root, "", keys: ["seed", "radio", "boxes", "beacons", "private_devices"])
        var seed: UInt64 = 0
        if let tree = fields["seed"] { seed = try integer(tree, "seed", as: UInt64.self) }
        var radio = RadioParameters()
        if let tree = fields["radio"] { radio = try radioParameters(tree, "radio") }
        do {
            try radio.validate()  // now: the beacon defaults below are computed from it
        } catch {
            throw error.prefixed("radio").at(place(for: "radio." + error.path))
        }
        let boxesTree = try required(fields, "boxes", in: "", root)
        var boxes: [BoxSpec] = []
        for (i, item) in try list(boxesTree, "boxes").enumerated() {
            boxes.append(try box(item, "boxes[\(i)]"))
        }
        var beacons: [BeaconSpec] = []
        if let tree = fields["beacons"] {
            for (i, item) in try list(tree, "beacons").enumerated() {
                beacons.append(try beacon(item, "beacons[\(i)]", radio: radio))
            }
        }
        var privateDevices: [PrivateDeviceSpec] = []
        if let tree = fields["private_devices"] {
            for (i, item) in try list(tree, "private_devices").enumerated() {
                privateDevices.append(try privateDevice(item, "private_devices[\(i)]"))
            }
        }
        return Scenario(seed: seed, radio: radio, boxes: boxes, beacons: beacons, privateDevices: privateDevices)
    }

    private mutating func radioParameters(_ tree: YAMLNode, _ path: String) throws(ScenarioError) -> RadioParameters {
        let keys: [(String, WritableKeyPath<RadioParameters, Double>)] = [
            ("path_loss_exponent", \.pathLossExponent),
            ("measured_power", \.measuredPower),
            ("shadowing_sigma", \.shadowingSigma),
            ("advertising_interval", \.advertisingInterval),
            ("packet_loss", \.packetLoss),
            ("connection_latency", \.connectionLatency),
            ("connection_failure_rate", \.connectionFailureRate),
            ("sensitivity", \.sensitivity),
            ("burst_loss_rate", \.burstLossRate),
            ("burst_duration", \.burstDuration),
            ("report_batching", \.reportBatching),
        ]
        let realisticKeys: [(String, WritableKeyPath<RadioParameters, Double>)] = [
            ("field_sigma", \.realistic.fieldSigma),
            ("field_decorrelation", \.realistic.fieldDecorrelation),
            ("temporal_sigma", \.realistic.temporalSigma),
            ("temporal_tau", \.realistic.temporalTau),
            ("channel_sigma", \.realistic.channelSigma),
            ("outlier_rate", \.realistic.outlierRate),
            ("outlier_sigma", \.realistic.outlierSigma),
            ("device_sigma", \.realistic.deviceSigma),
        ]
        let fields = try object(tree, path, keys: ["preset"] + keys.map(\.0) + realisticKeys.map(\.0))
        var radio = RadioParameters()
        // A preset first; the keys given override its values.
        if let preset = fields["preset"] {
            let name = try string(preset, Self.join(path, "preset"))
            switch name {
            case "simple": break
            case "realistic": radio = .realistic
            default:
                throw ScenarioError(path: Self.join(path, "preset"), message: "must be simple or realistic, not \"\(name)\"")
                    .at(place(for: Self.join(path, "preset")))
            }
        }
        for (key, keyPath) in keys + realisticKeys {
            if let value = fields[key] { radio[keyPath: keyPath] = try number(value, Self.join(path, key)) }
        }
        return radio
    }

    private mutating func box(_ tree: YAMLNode, _ path: String) throws(ScenarioError) -> BoxSpec {
        let fields = try object(tree, path, keys: ["name", "address", "adapter", "position", "waypoints", "tx_offset"])
        let name = try string(try required(fields, "name", in: path, tree), Self.join(path, "name"))
        let address = try address(try required(fields, "address", in: path, tree), Self.join(path, "address"))
        var adapter = "hci0"
        if let value = fields["adapter"] { adapter = try string(value, Self.join(path, "adapter")) }
        let trajectory = try trajectory(fields, path, tree)
        return BoxSpec(name: name, address: address, adapter: adapter, trajectory: trajectory,
                       txOffset: try optionalNumber(fields, "tx_offset", path) ?? 0)
    }

    mutating func beacon(_ tree: YAMLNode, _ path: String, radio: RadioParameters) throws(ScenarioError) -> BeaconSpec {
        let frameKeys = ["ibeacon", "altbeacon", "eddystone_uid", "eddystone_url", "decoy"]
        let fields = try object(
            tree, path, keys: ["name", "address"] + frameKeys + ["position", "waypoints", "advertising_interval", "tx_offset"])
        let name = try string(try required(fields, "name", in: path, tree), Self.join(path, "name"))
        let address = try address(try required(fields, "address", in: path, tree), Self.join(path, "address"))
        let given = frameKeys.filter { fields[$0] != nil }
        guard given.count == 1, let kind = given.first, let frameTree = fields[kind] else {
            throw error(path, given.isEmpty
                ? "missing a frame: give one of \(frameKeys.joined(separator: ", "))"
                : "a beacon sends one kind of frame, found \(given.joined(separator: " and "))", tree)
        }
        let frame = try frame(kind, frameTree, Self.join(path, kind), radio: radio)
        let trajectory = try trajectory(fields, path, tree)
        return BeaconSpec(name: name, address: address, frame: frame, trajectory: trajectory,
                          advertisingInterval: try optionalNumber(fields, "advertising_interval", path),
                          txOffset: try optionalNumber(fields, "tx_offset", path) ?? 0)
    }

    private mutating func privateDevice(_ tree: YAMLNode, _ path: String) throws(ScenarioError) -> PrivateDeviceSpec {
        let fields = try object(
            tree, path, keys: ["name", "irk", "rotation", "position", "waypoints", "advertising_interval", "tx_offset"])
        let name = try string(try required(fields, "name", in: path, tree), Self.join(path, "name"))
        let irkTree = try required(fields, "irk", in: path, tree)
        let irkText = try string(irkTree, Self.join(path, "irk"))
        let irk: IdentityResolvingKey
        do {
            irk = try IdentityResolvingKey(parsing: irkText)
        } catch {
            // The key is not repeated: in life it is a secret.
            throw self.error(Self.join(path, "irk"), error.description, irkTree)
        }
        let trajectory = try trajectory(fields, path, tree)
        return PrivateDeviceSpec(name: name, irk: irk,
                                 rotation: try optionalNumber(fields, "rotation", path) ?? PrivateDeviceSpec.defaultRotation,
                                 trajectory: trajectory, advertisingInterval: try optionalNumber(fields, "advertising_interval", path),
                                 txOffset: try optionalNumber(fields, "tx_offset", path) ?? 0)
    }

    private mutating func address(_ tree: YAMLNode, _ path: String) throws(ScenarioError) -> String {
        let text = try string(tree, path)
        guard let address = BoxSpec.normalizedAddress(text) else {
            throw error(path, "\"\(text)\" is not a Bluetooth address in the form AA:BB:CC:DD:EE:FF", tree)
        }
        return address
    }

    private mutating func frame(_ kind: String, _ tree: YAMLNode, _ path: String,
                                radio: RadioParameters) throws(ScenarioError) -> BeaconFrame {
        // Calibration defaults to the scenario's measured power, so an uncalibrated beacon ranges
        // like a box.
        let defaultPower = Int8(radio.measuredPower.rounded())
        let defaultTxPower = Int8(clamping: Int(radio.measuredPower.rounded()) + 41)
        func power(_ fields: [String: YAMLNode], _ key: String, default value: Int8) throws(ScenarioError) -> Int8 {
            guard let tree = fields[key] else { return value }
            return try integer(tree, Self.join(path, key), as: Int8.self)
        }
        switch kind {
        case "ibeacon":
            let fields = try object(tree, path, keys: ["uuid", "major", "minor", "measured_power"])
            return .iBeacon(
                uuid: try uuid(try required(fields, "uuid", in: path, tree), Self.join(path, "uuid")),
                major: try integer(try required(fields, "major", in: path, tree), Self.join(path, "major"), as: UInt16.self),
                minor: try integer(try required(fields, "minor", in: path, tree), Self.join(path, "minor"), as: UInt16.self),
                measuredPower: try power(fields, "measured_power", default: defaultPower))
        case "altbeacon":
            let fields = try object(tree, path, keys: ["manufacturer", "id1", "id2", "id3", "reference_rssi"])
            var manufacturer = BeaconFrame.radiusNetworksCompanyID
            if let value = fields["manufacturer"] { manufacturer = try integer(value, Self.join(path, "manufacturer"), as: UInt16.self) }
            return .altBeacon(
                manufacturer: manufacturer,
                id1: try uuid(try required(fields, "id1", in: path, tree), Self.join(path, "id1")),
                id2: try integer(try required(fields, "id2", in: path, tree), Self.join(path, "id2"), as: UInt16.self),
                id3: try integer(try required(fields, "id3", in: path, tree), Self.join(path, "id3"), as: UInt16.self),
                referenceRSSI: try power(fields, "reference_rssi", default: defaultPower))
        case "decoy":
            let fields = try object(tree, path, keys: ["uuid", "measured_power"])
            return .decoy(serviceUUID: try uuid(try required(fields, "uuid", in: path, tree),
                                                Self.join(path, "uuid")).uuidString.lowercased(),
                          measuredPower: try power(fields, "measured_power", default: defaultPower))
        case "eddystone_uid":
            let fields = try object(tree, path, keys: ["namespace", "instance", "tx_power"])
            return .eddystoneUID(
                namespace: try hexBytes(try required(fields, "namespace", in: path, tree), Self.join(path, "namespace"), count: 10),
                instance: try hexBytes(try required(fields, "instance", in: path, tree), Self.join(path, "instance"), count: 6),
                txPowerAt0m: try power(fields, "tx_power", default: defaultTxPower))
        default:
            let fields = try object(tree, path, keys: ["url", "tx_power"])
            let urlTree = try required(fields, "url", in: path, tree)
            let url = try string(urlTree, Self.join(path, "url"))
            do {
                _ = try BeaconFrame.encodeEddystoneURL(url)
            } catch {
                throw self.error(Self.join(path, "url"), error.message, urlTree)
            }
            return .eddystoneURL(url: url, txPowerAt0m: try power(fields, "tx_power", default: defaultTxPower))
        }
    }

    /// `position` (a fixed point) or `waypoints`, exactly one of them.
    private mutating func trajectory(_ fields: [String: YAMLNode], _ path: String,
                                     _ parent: YAMLNode) throws(ScenarioError) -> Trajectory {
        switch (fields["position"], fields["waypoints"]) {
        case (let position?, nil):
            return Trajectory(fixed: try self.position(position, Self.join(path, "position")))
        case (nil, let waypointsTree?):
            let listPath = Self.join(path, "waypoints")
            var waypoints: [Waypoint] = []
            for (i, item) in try list(waypointsTree, listPath).enumerated() {
                let itemPath = "\(listPath)[\(i)]"
                let point = try object(item, itemPath, keys: ["t", "at"])
                let time = try number(try required(point, "t", in: itemPath, item), Self.join(itemPath, "t"))
                guard time >= 0 else {
                    throw error(Self.join(itemPath, "t"), "must be 0 or more seconds since the start, not \(ScenarioError.show(time))",
                                point["t"] ?? item)
                }
                let at = try position(try required(point, "at", in: itemPath, item), Self.join(itemPath, "at"))
                waypoints.append(Waypoint(time: time, position: at))
            }
            do {
                return try Trajectory(waypoints: waypoints)
            } catch {
                let full = error.prefixed(path)
                throw full.at(place(for: full.path))
            }
        case (nil, nil):
            throw error(path, "missing a position: give position (a fixed point) or waypoints", parent)
        case (_?, _?):
            throw error(path, "give either position or waypoints, not both", parent)
        }
    }

    /// `[x, y]` or `[x, y, z]`, metres.
    private mutating func position(_ tree: YAMLNode, _ path: String) throws(ScenarioError) -> Position {
        let items = try list(tree, path)
        guard items.count == 2 || items.count == 3 else {
            throw error(path, "a position is [x, y] or [x, y, z] in metres, found \(items.count) coordinates", tree)
        }
        var coordinates: [Double] = []
        for (i, item) in items.enumerated() {
            coordinates.append(try number(item, "\(path)[\(i)]"))
        }
        return Position(x: coordinates[0], y: coordinates[1], z: items.count == 3 ? coordinates[2] : 0)
    }
}

extension ScenarioError {
    /// The error at `place`, unless it already has a line.
    func at(_ place: ScenarioPlace?) -> ScenarioError {
        guard line == nil, let place else { return self }
        return ScenarioError(path: path, message: message, line: place.line, column: place.column, file: file)
    }
}

/// Where a value of a scenario file is: 1-based line, and column in characters.
struct ScenarioPlace: Sendable, Hashable {
    var line: Int
    var column: Int?
}

extension ScenarioPlace {
    init(_ position: YAMLPosition) {
        self.init(line: position.line, column: position.column)
    }
}
