import Foundation
import ProximityTrust
import StrictYAML

/// A simulation: which boxes, beacons and private devices exist, where they are over time, the
/// radio between them, and the seed every random number is derived from.
///
/// Read from a JSON or YAML file (format in docs/simulator.md). A scenario built in code should
/// pass ``validate()``, which the parser always runs.
public struct Scenario: Sendable, Hashable {
    /// The root of every random stream of the run (see ``SeededGenerator/derived(_:)``).
    public var seed: UInt64
    public var radio: RadioParameters
    public var boxes: [BoxSpec]
    public var beacons: [BeaconSpec]
    /// Phones and the like: advertisers whose address is a resolvable private address they change
    /// every ``PrivateDeviceSpec/rotation`` seconds.
    public var privateDevices: [PrivateDeviceSpec]

    public init(seed: UInt64 = 0, radio: RadioParameters = RadioParameters(), boxes: [BoxSpec], beacons: [BeaconSpec] = [],
                privateDevices: [PrivateDeviceSpec] = []) {
        self.seed = seed
        self.radio = radio
        self.boxes = boxes
        self.beacons = beacons
        self.privateDevices = privateDevices
    }

    /// The radio model for ``radio``.
    public var radioModel: RadioModel { RadioModel(radio) }

    /// The root generator, ``seed``'s stream; derive a labelled stream from it for each part.
    public var generator: SeededGenerator { SeededGenerator(seed: seed) }

    public func box(named name: String) -> BoxSpec? { boxes.first { $0.name == name } }
    public func beacon(named name: String) -> BeaconSpec? { beacons.first { $0.name == name } }
    public func privateDevice(named name: String) -> PrivateDeviceSpec? { privateDevices.first { $0.name == name } }

    /// Reads a scenario file; the format follows the extension: `.json`, `.yaml` or `.yml`.
    /// Errors carry the file's path and, where known, the line and column. A file larger than
    /// ``YAMLLimits/maxSize`` is refused unread.
    public static func load(from url: URL) throws(ScenarioError) -> Scenario {
        let file = url.path
        let format: ScenarioFormat
        switch url.pathExtension.lowercased() {
        case "json": format = .json
        case "yaml", "yml": format = .yaml
        case let other:
            throw ScenarioError(path: "", message: "unknown scenario format \"\(other)\": name the file .json, .yaml or .yml",
                                file: file)
        }
        let data: Data
        do {
            let size = try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int ?? 0
            guard size <= YAMLLimits.maxSize else {
                throw ScenarioError(path: "", message: "the file is larger than \(YAMLLimits.maxSize >> 20) MiB", file: file)
            }
            data = try Data(contentsOf: url)
        } catch let error as ScenarioError {
            throw error
        } catch {
            throw ScenarioError(path: "", message: "cannot read the file: \(error.localizedDescription)", file: file)
        }
        // YAML finds the place of a byte that is not UTF-8 itself.
        if format == .json, String(data: data, encoding: .utf8) == nil {
            throw ScenarioError(path: "", message: "the file is not UTF-8 text", file: file)
        }
        do {
            return try parse(bytes: Array(data), format: format)
        } catch {
            throw ScenarioError(path: error.path, message: error.message, line: error.line, column: error.column, file: file)
        }
    }

    /// Parses and validates a scenario. Unknown keys, wrong types and out-of-range values are
    /// errors, each with the path of the offending value (`boxes[1].address`).
    public static func parse(_ text: String, format: ScenarioFormat) throws(ScenarioError) -> Scenario {
        try parse(bytes: Array(text.utf8), format: format)
    }

    static func parse(bytes: [UInt8], format: ScenarioFormat) throws(ScenarioError) -> Scenario {
        let tree = try ScenarioTree.parse(bytes, format: format)
        var decoder = ScenarioDecoder()
        let scenario = try decoder.scenario(tree)
        do {
            try scenario.validate()
        } catch {
            throw error.at(decoder.place(for: error.path))
        }
        return scenario
    }

    /// Checks what the types cannot: at least one box; names, addresses and adapters well formed;
    /// names unique across boxes, beacons and private devices, addresses across boxes and beacons,
    /// IRKs across private devices; the radio, beacon and private device parameters in range;
    /// beacon frames encodable. Paths are the scenario file's.
    public func validate() throws(ScenarioError) {
        do {
            try radio.validate()
        } catch {
            throw error.prefixed("radio")
        }
        guard !boxes.isEmpty else {
            throw ScenarioError(path: "boxes", message: "a scenario needs at least one box")
        }
        var names: [String: String] = [:]
        var addresses: [String: String] = [:]
        func claim(name: String, address: String, at path: String) throws(ScenarioError) {
            if let other = names[name] {
                throw ScenarioError(path: path + ".name", message: "duplicate name \"\(name)\" (also \(other))")
            }
            if let other = addresses[address] {
                throw ScenarioError(path: path + ".address", message: "duplicate address \(address) (also \(other))")
            }
            names[name] = path
            addresses[address] = path
        }
        for (i, box) in boxes.enumerated() {
            let path = "boxes[\(i)]"
            do {
                try box.validate()
            } catch {
                throw error.prefixed(path)
            }
            try claim(name: box.name, address: box.address, at: path)
        }
        for (i, beacon) in beacons.enumerated() {
            let path = "beacons[\(i)]"
            do {
                try beacon.validate()
            } catch {
                throw error.prefixed(path)
            }
            try claim(name: beacon.name, address: beacon.address, at: path)
        }
        // A private device has no fixed address (its addresses are random, 2⁻²² apart from each
        // other's), so only its name and its key are claimed.
        var keys: [IdentityResolvingKey: String] = [:]
        for (i, device) in privateDevices.enumerated() {
            let path = "private_devices[\(i)]"
            do {
                try device.validate()
            } catch {
                throw error.prefixed(path)
            }
            if let other = names[device.name] {
                throw ScenarioError(path: path + ".name", message: "duplicate name \"\(device.name)\" (also \(other))")
            }
            if let other = keys[device.irk] {
                throw ScenarioError(path: path + ".irk", message: "duplicate irk (also \(other)): one key is one device")
            }
            names[device.name] = path
            keys[device.irk] = path
        }
    }
}

/// The syntax of a scenario file.
public enum ScenarioFormat: Sendable, Hashable {
    case json, yaml
}

/// A bad scenario: where (`path`, e.g. `boxes[1].address`; empty for the document as a whole)
/// and what is wrong; the file, line and column when known.
public struct ScenarioError: Error, CustomStringConvertible, Sendable, Hashable {
    public let path: String
    public let message: String
    /// 1-based line of the offending value (or key), when the parser knows it.
    public let line: Int?
    /// 1-based column of the offending value (or key), in characters, when the parser knows it.
    public let column: Int?
    /// The file, for errors from ``Scenario/load(from:)``.
    public let file: String?

    public init(path: String, message: String, line: Int? = nil, column: Int? = nil, file: String? = nil) {
        self.path = path
        self.message = message
        self.line = line
        self.column = line == nil ? nil : column
        self.file = file
    }

    /// `walk-past.yaml:12:14: boxes[1].address: "x" is not a Bluetooth address ...`, as the
    /// daemon's config file reports its problems (FILE:LINE:COLUMN); `line 12: …` without a file
    /// (a scenario given as text: the control interface's AddBeacon, the tests).
    public var description: String {
        var text = ""
        switch (file, line) {
        case let (file?, line?): text = "\(file):\(line):" + (column.map { "\($0):" } ?? "") + " "
        case let (file?, nil): text = "\(file): "
        case let (nil, line?): text = "line \(line): "
        case (nil, nil): break
        }
        return text + (path.isEmpty ? message : "\(path): \(message)")
    }

    /// A number as a person would write it: `-1`, not `-1.0`.
    static func show(_ value: Double) -> String {
        value.isFinite && value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : "\(value)"
    }

    /// The same error under `prefix` (`waypoints[2].t` under `boxes[1]`).
    func prefixed(_ prefix: String) -> ScenarioError {
        ScenarioError(path: Self.join(prefix, path), message: message, line: line, column: column, file: file)
    }

    /// `a` then `b` as one path: `boxes[1]` and `name` give `boxes[1].name`; either may be empty.
    static func join(_ a: String, _ b: String) -> String {
        if a.isEmpty { return b }
        if b.isEmpty { return a }
        return b.hasPrefix("[") ? a + b : a + "." + b
    }
}

/// A box: one simulated machine with its own bus, "bluetoothd" and adapter.
public struct BoxSpec: Sendable, Hashable {
    /// 1–32 letters, digits, `_` or `-`, starting with a letter or digit; unique in the scenario.
    public var name: String
    /// The adapter's public address, `AA:BB:CC:DD:EE:FF`, uppercase.
    public var address: String
    /// The adapter's name, `hciN`.
    public var adapter: String
    public var trajectory: Trajectory
    /// A fixed offset of everything this box transmits, dB (`tx_offset`): its RSSI at 1 m is the
    /// radio's measured power plus this. 0: none.
    public var txOffset: Double

    /// `address` is stored uppercase; ``Scenario/validate()`` checks the rest.
    public init(name: String, address: String, adapter: String = "hci0", trajectory: Trajectory, txOffset: Double = 0) {
        self.name = name
        self.address = address.uppercased()
        self.adapter = adapter
        self.trajectory = trajectory
        self.txOffset = txOffset
    }

    /// Checks the name, address, adapter and TX offset; paths are relative (`address`).
    public func validate() throws(ScenarioError) {
        try Self.validate(name: name, address: address)
        guard Self.isValidAdapter(adapter) else {
            throw ScenarioError(path: "adapter", message: "\"\(adapter)\" is not an adapter name like hci0")
        }
        try Self.validate(txOffset: txOffset)
    }

    /// The range of `tx_offset`, dB.
    public static let txOffsetRange: ClosedRange<Double> = -60...60

    static func validate(txOffset: Double) throws(ScenarioError) {
        guard txOffset.isFinite, txOffsetRange.contains(txOffset) else {
            throw ScenarioError(path: "tx_offset", message: "must be -60...60 dB, not \(ScenarioError.show(txOffset))")
        }
    }

    /// The rules boxes and beacons share.
    static func validate(name: String, address: String) throws(ScenarioError) {
        try validate(name: name)
        guard normalizedAddress(address) == address else {
            throw ScenarioError(path: "address", message: "\"\(address)\" is not a Bluetooth address in the form AA:BB:CC:DD:EE:FF")
        }
    }

    /// The rule of every name: boxes', beacons' and private devices'.
    static func validate(name: String) throws(ScenarioError) {
        guard isValidName(name) else {
            throw ScenarioError(
                path: "name",
                message: "\"\(name)\" is not a valid name: 1–32 letters, digits, '_' or '-', starting with a letter or digit")
        }
    }

    /// `address` as six colon-separated hex pairs in uppercase, or nil if it is not one.
    public static func normalizedAddress(_ address: String) -> String? {
        let parts = address.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 6, parts.allSatisfy({ $0.utf8.count == 2 && $0.allSatisfy(\.isHexDigit) && $0.allSatisfy(\.isASCII) })
        else { return nil }
        return address.uppercased()
    }

    public static func isValidName(_ name: String) -> Bool {
        let scalars = Array(name.unicodeScalars)
        guard (1...32).contains(scalars.count), let first = scalars.first, isAlphanumericASCII(first) else { return false }
        return scalars.allSatisfy { isAlphanumericASCII($0) || $0 == "_" || $0 == "-" }
    }

    /// `hci0`, `hci1`, ... (no leading zeros, at most `hci999`).
    public static func isValidAdapter(_ adapter: String) -> Bool {
        guard adapter.hasPrefix("hci") else { return false }
        let digits = adapter.dropFirst(3)
        guard (1...3).contains(digits.count), digits.allSatisfy({ $0.isASCII && $0.isNumber }) else { return false }
        return digits == "0" || digits.first != "0"
    }

    private static func isAlphanumericASCII(_ c: Unicode.Scalar) -> Bool {
        ("a"..."z").contains(c) || ("A"..."Z").contains(c) || ("0"..."9").contains(c)
    }
}

/// A third-party beacon: it only advertises its frame; nobody connects to it.
public struct BeaconSpec: Sendable, Hashable {
    public var name: String
    /// `AA:BB:CC:DD:EE:FF`, uppercase.
    public var address: String
    public var frame: BeaconFrame
    public var trajectory: Trajectory
    /// Seconds between advertising events; nil means the scenario radio's.
    public var advertisingInterval: Double?
    /// A fixed offset of what the beacon transmits, dB (`tx_offset`): its RSSI at 1 m is its
    /// frame's calibration plus this (a beacon whose frame claims more than it sends). 0: none.
    public var txOffset: Double

    /// `address` is stored uppercase; ``Scenario/validate()`` checks the rest.
    public init(name: String, address: String, frame: BeaconFrame, trajectory: Trajectory, advertisingInterval: Double? = nil,
                txOffset: Double = 0) {
        self.name = name
        self.address = address.uppercased()
        self.frame = frame
        self.trajectory = trajectory
        self.advertisingInterval = advertisingInterval
        self.txOffset = txOffset
    }

    /// Checks the name, address, frame and interval; paths are relative (`eddystone_uid`).
    public func validate() throws(ScenarioError) {
        try BoxSpec.validate(name: name, address: address)
        do {
            try frame.validate()
        } catch {
            throw ScenarioError(path: frame.scenarioKey, message: error.message)
        }
        try Self.validate(advertisingInterval: advertisingInterval)
        try BoxSpec.validate(txOffset: txOffset)
    }

    /// The rule of a beacon's and a private device's own `advertising_interval`.
    static func validate(advertisingInterval: Double?) throws(ScenarioError) {
        if let interval = advertisingInterval, !RadioParameters.advertisingIntervalRange.contains(interval) {
            throw ScenarioError(path: "advertising_interval",
                                message: "must be 0.02...10.24 s (Bluetooth's advertising interval range), " +
                                    "not \(ScenarioError.show(interval))")
        }
    }

    /// Parses one entry of a scenario's `beacons` list on its own (for the control interface).
    /// Paths are relative to the entry (`ibeacon.major`); uncalibrated frames take `radio`'s
    /// measured power. Uniqueness against the running scenario is the caller's to check.
    public static func parse(_ text: String, format: ScenarioFormat, radio: RadioParameters) throws(ScenarioError) -> BeaconSpec {
        do {
            try radio.validate()  // the frame defaults are computed from it
        } catch {
            throw error.prefixed("radio")
        }
        let tree = try ScenarioTree.parse(Array(text.utf8), format: format)
        var decoder = ScenarioDecoder()
        let beacon = try decoder.beacon(tree, "", radio: radio)
        do {
            try beacon.validate()
        } catch {
            throw error.at(decoder.place(for: error.path))
        }
        return beacon
    }
}

/// A device that advertises from resolvable private addresses, as a phone does: at the start, and
/// then every ``rotation`` seconds, it makes a new one from its identity resolving key (the
/// Bluetooth `ah` function, ``IdentityResolvingKey/address(prand:)``), so only someone who has the
/// key can tell that two addresses are the same device's. Nobody connects to it. What it advertises
/// is not its own either: every private device sends the same ``manufacturerData``, so nothing in
/// the air is stable but through the key.
public struct PrivateDeviceSpec: Sendable, Hashable {
    /// As a box's or beacon's; unique across boxes, beacons and private devices.
    public var name: String
    /// The key its addresses are made with (`irk`, 32 hex digits); unique across private devices.
    public var irk: IdentityResolvingKey
    /// Seconds between address changes (`rotation`), ``rotationRange``: the first address from
    /// the start, a new one at every multiple of this.
    public var rotation: Double
    public var trajectory: Trajectory
    /// Seconds between advertising events; nil means the scenario radio's.
    public var advertisingInterval: Double?
    /// A fixed offset of what the device transmits, dB (`tx_offset`): its RSSI at 1 m is the
    /// radio's measured power plus this. 0: none.
    public var txOffset: Double

    /// The rotation when none is given: 15 minutes, about what phones do.
    public static let defaultRotation: Double = 900
    /// The range of `rotation`, seconds.
    public static let rotationRange: ClosedRange<Double> = 1...3600
    /// What every private device advertises: under Apple's company id (0x004C), a constant
    /// 7-byte payload in the shape of Apple's "Nearby Info" (type 0x10, length 5, status, flags,
    /// a 3-byte tag, here zeros), the same for every device. Not an iBeacon (those start 02 15).
    public static let manufacturerData: [UInt16: [UInt8]] = [0x004C: [0x10, 0x05, 0x01, 0x18, 0x00, 0x00, 0x00]]

    public init(name: String, irk: IdentityResolvingKey, rotation: Double = PrivateDeviceSpec.defaultRotation,
                trajectory: Trajectory, advertisingInterval: Double? = nil, txOffset: Double = 0) {
        self.name = name
        self.irk = irk
        self.rotation = rotation
        self.trajectory = trajectory
        self.advertisingInterval = advertisingInterval
        self.txOffset = txOffset
    }

    /// Checks the name, rotation, interval and TX offset; paths are relative (`rotation`).
    public func validate() throws(ScenarioError) {
        try BoxSpec.validate(name: name)
        guard rotation.isFinite, Self.rotationRange.contains(rotation) else {
            throw ScenarioError(path: "rotation", message: "must be 1...3600 s, not \(ScenarioError.show(rotation))")
        }
        try BeaconSpec.validate(advertisingInterval: advertisingInterval)
        try BoxSpec.validate(txOffset: txOffset)
    }
}

extension BeaconFrame {
    /// The key that introduces this kind of frame in a scenario file.
    var scenarioKey: String {
        switch self {
        case .iBeacon: "ibeacon"
        case .altBeacon: "altbeacon"
        case .eddystoneUID: "eddystone_uid"
        case .eddystoneURL: "eddystone_url"
        case .decoy: "decoy"
        }
    }
}

// MARK: - Decoding a parsed document into a Scenario

/// Turns a ``ScenarioTree`` into a ``Scenario``: shapes, types, unknown keys and per-field ranges,
/// each error with its path. Cross-field rules are ``Scenario/validate()``'s; the decoder keeps
/// the place of every path it visits so those errors get a line and column too.
private struct ScenarioDecoder {
    private var places: [String: ScenarioPlace] = [:]

    /// The place of `path`, or of its nearest ancestor the decoder saw.
    func place(for path: String) -> ScenarioPlace? {
        var path = Substring(path)
        while true {
            if let place = places[String(path)] { return place }
            guard let cut = path.lastIndex(where: { $0 == "." || $0 == "[" }) else { return nil }
            path = path[..<cut]
        }
    }

    private func error(_ path: String, _ message: String, _ tree: ScenarioTree) -> ScenarioError {
        ScenarioError(path: path, message: message).at(tree.place)
    }

    private static func join(_ path: String, _ key: String) -> String {
        ScenarioError.join(path, key)
    }

    // MARK: Shapes and scalars

    /// A mapping whose keys are all in `keys`; returns the values by key. Duplicate keys (JSON)
    /// and unknown keys are errors.
    private mutating func object(_ tree: ScenarioTree, _ path: String, keys: [String]) throws(ScenarioError) -> [String: ScenarioTree] {
        places[path] = tree.place
        guard case .mapping(let entries) = tree.kind else {
            throw error(path, "expected a mapping, found \(tree.kindDescription)", tree)
        }
        var result: [String: ScenarioTree] = [:]
        for entry in entries {
            let keyPath = Self.join(path, entry.key)
            guard keys.contains(entry.key) else {
                throw ScenarioError(path: keyPath, message: "unknown key; expected one of: \(keys.joined(separator: ", "))")
                    .at(entry.keyPlace ?? entry.value.place)
            }
            guard result[entry.key] == nil else {
                throw ScenarioError(path: keyPath, message: "duplicate key").at(entry.keyPlace ?? entry.value.place)
            }
            result[entry.key] = entry.value
            places[keyPath] = entry.value.place
        }
        return result
    }

    private func required(_ object: [String: ScenarioTree], _ key: String, in path: String,
                          _ parent: ScenarioTree) throws(ScenarioError) -> ScenarioTree {
        guard let value = object[key] else {
            throw error(Self.join(path, key), "missing", parent)
        }
        return value
    }

    private mutating func list(_ tree: ScenarioTree, _ path: String) throws(ScenarioError) -> [ScenarioTree] {
        places[path] = tree.place
        guard case .sequence(let items) = tree.kind else {
            throw error(path, "expected a list, found \(tree.kindDescription)", tree)
        }
        for (i, item) in items.enumerated() { places["\(path)[\(i)]"] = item.place }
        return items
    }

    /// A string; in YAML any unquoted scalar but null counts as its text, so an unquoted address
    /// that YAML 1.1 would read as a sexagesimal number still works.
    private func string(_ tree: ScenarioTree, _ path: String) throws(ScenarioError) -> String {
        if case .string(let text) = tree.kind { return text }
        if let text = tree.plainText, !tree.isNull { return text }
        throw error(path, "expected a string, found \(tree.kindDescription)", tree)
    }

    /// A finite number.
    /// The number under `key` of an object's `fields`, or nil when the key is absent.
    private func optionalNumber(_ fields: [String: ScenarioTree], _ key: String, _ path: String) throws(ScenarioError) -> Double? {
        guard let value = fields[key] else { return nil }
        return try number(value, Self.join(path, key))
    }

    private func number(_ tree: ScenarioTree, _ path: String) throws(ScenarioError) -> Double {
        guard case .number(let number) = tree.kind else {
            throw error(path, "expected a number, found \(tree.kindDescription)", tree)
        }
        guard number.value.isFinite else {
            throw error(path, "must be a finite number", tree)
        }
        return number.value
    }

    /// A whole number that fits `T`.
    private func integer<T: FixedWidthInteger>(_ tree: ScenarioTree, _ path: String, as type: T.Type) throws(ScenarioError) -> T {
        let range = "\(T.min)...\(T.max)"
        guard case .number(let number) = tree.kind else {
            throw error(path, "expected an integer in \(range), found \(tree.kindDescription)", tree)
        }
        if let value = number.int64.flatMap({ T(exactly: $0) }) ?? number.uint64.flatMap({ T(exactly: $0) }) {
            return value
        }
        throw error(path, "must be an integer in \(range), not \(number.text)", tree)
    }

    private func uuid(_ tree: ScenarioTree, _ path: String) throws(ScenarioError) -> UUID {
        let text = try string(tree, path)
        guard let uuid = UUID(uuidString: text) else {
            throw error(path, "\"\(text)\" is not a UUID (8-4-4-4-12 hex digits)", tree)
        }
        return uuid
    }

    private func hexBytes(_ tree: ScenarioTree, _ path: String, count: Int) throws(ScenarioError) -> [UInt8] {
        let text = try string(tree, path)
        guard let bytes = BeaconFrame.bytes(fromHex: text), bytes.count == count else {
            throw error(path, "must be \(count) bytes as \(2 * count) hex digits, not \"\(text)\"", tree)
        }
        return bytes
    }

    // MARK: The scenario

    mutating func scenario(_ root: ScenarioTree) throws(ScenarioError) -> Scenario {
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

    private mutating func radioParameters(_ tree: ScenarioTree, _ path: String) throws(ScenarioError) -> RadioParameters {
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

    private mutating func box(_ tree: ScenarioTree, _ path: String) throws(ScenarioError) -> BoxSpec {
        let fields = try object(tree, path, keys: ["name", "address", "adapter", "position", "waypoints", "tx_offset"])
        let name = try string(try required(fields, "name", in: path, tree), Self.join(path, "name"))
        let address = try address(try required(fields, "address", in: path, tree), Self.join(path, "address"))
        var adapter = "hci0"
        if let value = fields["adapter"] { adapter = try string(value, Self.join(path, "adapter")) }
        let trajectory = try trajectory(fields, path, tree)
        return BoxSpec(name: name, address: address, adapter: adapter, trajectory: trajectory,
                       txOffset: try optionalNumber(fields, "tx_offset", path) ?? 0)
    }

    mutating func beacon(_ tree: ScenarioTree, _ path: String, radio: RadioParameters) throws(ScenarioError) -> BeaconSpec {
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

    private mutating func privateDevice(_ tree: ScenarioTree, _ path: String) throws(ScenarioError) -> PrivateDeviceSpec {
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

    private func address(_ tree: ScenarioTree, _ path: String) throws(ScenarioError) -> String {
        let text = try string(tree, path)
        guard let address = BoxSpec.normalizedAddress(text) else {
            throw error(path, "\"\(text)\" is not a Bluetooth address in the form AA:BB:CC:DD:EE:FF", tree)
        }
        return address
    }

    private mutating func frame(_ kind: String, _ tree: ScenarioTree, _ path: String,
                                radio: RadioParameters) throws(ScenarioError) -> BeaconFrame {
        // Calibration defaults to the scenario's measured power, so an uncalibrated beacon ranges
        // like a box.
        let defaultPower = Int8(radio.measuredPower.rounded())
        let defaultTxPower = Int8(clamping: Int(radio.measuredPower.rounded()) + 41)
        func power(_ fields: [String: ScenarioTree], _ key: String, default value: Int8) throws(ScenarioError) -> Int8 {
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
    private mutating func trajectory(_ fields: [String: ScenarioTree], _ path: String,
                                     _ parent: ScenarioTree) throws(ScenarioError) -> Trajectory {
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
    private mutating func position(_ tree: ScenarioTree, _ path: String) throws(ScenarioError) -> Position {
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
    fileprivate func at(_ place: ScenarioPlace?) -> ScenarioError {
        guard line == nil, let place else { return self }
        return ScenarioError(path: path, message: message, line: place.line, column: place.column, file: file)
    }
}

/// Where a value of a scenario file is: 1-based line, and column in characters.
struct ScenarioPlace: Sendable, Hashable {
    var line: Int
    var column: Int?
}

// MARK: - The parsed document, whatever the syntax

/// A parsed JSON or YAML document: the subset of both that a scenario uses, with the place of
/// every value for error messages. YAML comes through the strict tree the daemon's config file
/// uses (StrictYAML): positions, duplicate keys refused where they are, its limits.
private struct ScenarioTree {
    struct Number {
        var value: Double
        /// As written in the source.
        var text: String
        /// Set when the source wrote an integer that fits.
        var int64: Int64?
        var uint64: UInt64?
    }

    struct Entry {
        var key: String
        var keyPlace: ScenarioPlace?
        var value: ScenarioTree
    }

    enum Kind {
        case null
        case bool(Bool)
        case number(Number)
        case string(String)
        case sequence([ScenarioTree])
        case mapping([Entry])
    }

    var kind: Kind
    var place: ScenarioPlace?
    /// The source text of an unquoted YAML scalar, whatever type YAML resolved it to.
    var plainText: String?

    var isNull: Bool {
        if case .null = kind { return true }
        return false
    }

    var kindDescription: String {
        switch kind {
        case .null: "null"
        case .bool(let value): "the boolean \(value)"
        case .number(let number): "the number \(number.text)"
        case .string(let text): "the string \"\(text)\""
        case .sequence: "a list"
        case .mapping: "a mapping"
        }
    }

    static func parse(_ bytes: [UInt8], format: ScenarioFormat) throws(ScenarioError) -> ScenarioTree {
        switch format {
        case .json:
            var reader = ScenarioJSONReader(bytes)
            return try reader.document()
        case .yaml:
            return try yaml(bytes)
        }
    }

    // MARK: YAML, through StrictYAML

    static func yaml(_ bytes: [UInt8]) throws(ScenarioError) -> ScenarioTree {
        let (root, problems) = StrictYAML.parse(bytes)
        if let problem = problems.min(by: { ($0.position ?? .init(line: 0, column: 0)) < ($1.position ?? .init(line: 0, column: 0)) }) {
            throw ScenarioError(path: "", message: problem.message).at(problem.position.map(ScenarioPlace.init))
        }
        guard let root else {
            throw ScenarioError(path: "", message: "the scenario is empty")
        }
        return try ScenarioTree(yaml: root, depth: 0)
    }

    private init(kind: Kind, place: ScenarioPlace?, plainText: String? = nil) {
        self.kind = kind
        self.place = place
        self.plainText = plainText
    }

    private init(yaml node: YAMLNode, depth: Int) throws(ScenarioError) {
        let place = ScenarioPlace(node.position)
        guard depth < ScenarioJSONReader.maximumDepth else {
            throw ScenarioError(path: "", message: "nested too deeply").at(place)
        }
        switch node.kind {
        case .null:
            self.init(kind: .null, place: place, plainText: node.isPlain ? node.text : nil)
        case .bool(let b):
            self.init(kind: .bool(b), place: place, plainText: node.isPlain ? node.text : nil)
        case .integer(let int64):
            let uint64 = node.unsignedValue
            let value = int64.map(Double.init) ?? uint64.map(Double.init) ?? Double(node.text) ?? .nan
            self.init(kind: .number(Number(value: value, text: node.text, int64: int64, uint64: uint64)), place: place,
                      plainText: node.isPlain ? node.text : nil)
        case .float(let d):
            self.init(kind: .number(Number(value: d, text: node.text)), place: place, plainText: node.isPlain ? node.text : nil)
        case .string(let text):
            self.init(kind: .string(text), place: place, plainText: node.isPlain ? node.text : nil)
        case .sequence(let sequence):
            var items: [ScenarioTree] = []
            for item in sequence {
                items.append(try ScenarioTree(yaml: item, depth: depth + 1))
            }
            self.init(kind: .sequence(items), place: place)
        case .mapping(let mapping):
            var entries: [Entry] = []
            var seen: [String: YAMLPosition] = [:]
            for entry in mapping {
                // Refused where the second one is, as the config file refuses it.
                if let first = seen[entry.key] {
                    throw ScenarioError(path: "", message: "duplicate key '\(entry.key)' (first at \(first))")
                        .at(ScenarioPlace(entry.keyPosition))
                }
                seen[entry.key] = entry.keyPosition
                entries.append(Entry(key: entry.key, keyPlace: ScenarioPlace(entry.keyPosition),
                                     value: try ScenarioTree(yaml: entry.value, depth: depth + 1)))
            }
            self.init(kind: .mapping(entries), place: place)
        }
    }

    // MARK: JSON

    static func json(_ kind: Kind, place: ScenarioPlace) -> ScenarioTree {
        ScenarioTree(kind: kind, place: place)
    }
}

extension ScenarioPlace {
    init(_ position: YAMLPosition) {
        self.init(line: position.line, column: position.column)
    }
}

/// A strict RFC 8259 JSON reader that keeps what a scenario's errors need and Foundation's
/// `JSONSerialization` drops: the line of every value, duplicate keys, integers versus numbers
/// versus booleans.
private struct ScenarioJSONReader {
    static let maximumDepth = 64

    private let bytes: [UInt8]
    private var index = 0
    private var line = 1
    private var lineStart = 0

    init(_ bytes: [UInt8]) {
        var bytes = bytes
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { bytes.removeFirst(3) }  // a byte-order mark
        self.bytes = bytes
    }

    mutating func document() throws(ScenarioError) -> ScenarioTree {
        skipWhitespace()
        guard index < bytes.count else {
            throw ScenarioError(path: "", message: "the scenario is empty")
        }
        let value = try value(depth: 0)
        skipWhitespace()
        guard index == bytes.count else {
            throw failure("unexpected \(current) after the document")
        }
        return value
    }

    /// Where the reader is: the line, and the column in characters.
    private var place: ScenarioPlace {
        ScenarioPlace(line: line, column: 1 + bytes[lineStart ..< index].count { $0 & 0xC0 != 0x80 })
    }

    private var current: String {
        guard index < bytes.count else { return "end of input" }
        let byte = bytes[index]
        guard (0x21...0x7E).contains(byte) else { return String(format: "byte 0x%02X", byte) }
        return byte == UInt8(ascii: "'") ? "\"'\"" : "'\(Character(Unicode.Scalar(byte)))'"
    }

    private func failure(_ message: String) -> ScenarioError {
        ScenarioError(path: "", message: "invalid JSON at column \(index - lineStart + 1): \(message)", line: line)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0D:
                index += 1
            case 0x0A:
                index += 1
                line += 1
                lineStart = index
            default:
                return
            }
        }
    }

    private mutating func expect(_ byte: UInt8, _ what: String) throws(ScenarioError) {
        guard index < bytes.count, bytes[index] == byte else {
            throw failure("expected \(what), found \(current)")
        }
        index += 1
    }

    private mutating func value(depth: Int) throws(ScenarioError) -> ScenarioTree {
        guard depth < Self.maximumDepth else { throw failure("nested too deeply") }
        guard index < bytes.count else { throw failure("expected a value, found end of input") }
        let start = place
        switch bytes[index] {
        case UInt8(ascii: "{"):
            index += 1
            var entries: [ScenarioTree.Entry] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .json(.mapping(entries), place: start)
            }
            while true {
                skipWhitespace()
                let keyPlace = place
                guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else {
                    throw failure("expected a key in double quotes, found \(current)")
                }
                let key = try string()
                skipWhitespace()
                try expect(UInt8(ascii: ":"), "':'")
                skipWhitespace()
                entries.append(ScenarioTree.Entry(key: key, keyPlace: keyPlace, value: try value(depth: depth + 1)))
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                try expect(UInt8(ascii: "}"), "',' or '}'")
                return .json(.mapping(entries), place: start)
            }
        case UInt8(ascii: "["):
            index += 1
            var items: [ScenarioTree] = []
            skipWhitespace()
            if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .json(.sequence(items), place: start)
            }
            while true {
                skipWhitespace()
                items.append(try value(depth: depth + 1))
                skipWhitespace()
                if index < bytes.count, bytes[index] == UInt8(ascii: ",") {
                    index += 1
                    continue
                }
                try expect(UInt8(ascii: "]"), "',' or ']'")
                return .json(.sequence(items), place: start)
            }
        case UInt8(ascii: "\""):
            return .json(.string(try string()), place: start)
        case UInt8(ascii: "t"):
            try literal("true")
            return .json(.bool(true), place: start)
        case UInt8(ascii: "f"):
            try literal("false")
            return .json(.bool(false), place: start)
        case UInt8(ascii: "n"):
            try literal("null")
            return .json(.null, place: start)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return .json(.number(try number()), place: start)
        default:
            throw failure("expected a value, found \(current)")
        }
    }

    private mutating func literal(_ word: String) throws(ScenarioError) {
        let expected = Array(word.utf8)
        guard bytes[index...].starts(with: expected) else { throw failure("expected a value, found \(current)") }
        index += expected.count
    }

    private mutating func string() throws(ScenarioError) -> String {
        index += 1  // the opening quote
        var out: [UInt8] = []
        while true {
            guard index < bytes.count else { throw failure("unterminated string") }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return String(decoding: out, as: UTF8.self)
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw failure("unterminated string") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(escape)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try hex4()
                    if (0xD800...0xDBFF).contains(code) {
                        guard bytes[index...].starts(with: Array("\\u".utf8)) else { throw failure("unpaired surrogate in \\u escape") }
                        index += 2
                        let low = try hex4()
                        guard (0xDC00...0xDFFF).contains(low) else { throw failure("unpaired surrogate in \\u escape") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw failure("unpaired surrogate in \\u escape") }
                    out.append(contentsOf: Array(String(Character(scalar)).utf8))
                default:
                    index -= 2
                    throw failure("invalid escape sequence in a string")
                }
            case 0x00..<0x20:
                throw failure("control character in a string (escape it)")
            default:
                out.append(byte)
                index += 1
            }
        }
    }

    private mutating func hex4() throws(ScenarioError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw failure("\\u needs four hex digits") }
        var code: UInt32 = 0
        for _ in 0..<4 {
            let c = bytes[index]
            let digit: UInt32
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(c - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(c - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(c - UInt8(ascii: "A") + 10)
            default: throw failure("\\u needs four hex digits")
            }
            code = code << 4 | digit
            index += 1
        }
        return code
    }

    /// `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`
    private mutating func number() throws(ScenarioError) -> ScenarioTree.Number {
        let start = index
        func digits() -> Int {
            let from = index
            while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            return index - from
        }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        let integerStart = index
        guard digits() > 0 else { throw failure("expected digits, found \(current)") }
        if bytes[integerStart] == UInt8(ascii: "0"), index - integerStart > 1 {
            index = integerStart + 1
            throw failure("leading zeros are not allowed")
        }
        var isInteger = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            isInteger = false
            guard digits() > 0 else { throw failure("expected digits after '.', found \(current)") }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            isInteger = false
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard digits() > 0 else { throw failure("expected exponent digits, found \(current)") }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        return ScenarioTree.Number(
            value: Double(text) ?? .nan,
            text: text,
            int64: isInteger ? Int64(text) : nil,
            uint64: isInteger ? UInt64(text) : nil)
    }
}
