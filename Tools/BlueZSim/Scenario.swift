import Foundation
import LibCrypto
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
        let tree = try ScenarioDecoder.document(bytes, format: format)
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
    static func show(_ value: Double) -> String { YAMLNode.show(value) }

    /// The same error under `prefix` (`waypoints[2].t` under `boxes[1]`).
    func prefixed(_ prefix: String) -> ScenarioError {
        ScenarioError(path: Self.join(prefix, path), message: message, line: line, column: column, file: file)
    }

    /// `a` then `b` as one path: `boxes[1]` and `name` give `boxes[1].name`; either may be empty.
    static func join(_ a: String, _ b: String) -> String { YAMLProblem.join(a, b) }
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
        let tree = try ScenarioDecoder.document(Array(text.utf8), format: format)
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
