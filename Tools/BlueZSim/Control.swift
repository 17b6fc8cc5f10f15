import DBusKit
import Foundation

/// Errors of the control interface, `org.proximityd.BlueZSim.Error.*`.
public enum ControlError: Error, DBusErrorConvertible, CustomStringConvertible, Sendable {
    case unknownBox(String)
    case unknownBeacon(String)
    case invalidArguments(String)

    public var dbusError: DBusError {
        switch self {
        case .unknownBox(let n): DBusError("org.proximityd.BlueZSim.Error.UnknownBox", "no box named \"\(n)\"")
        case .unknownBeacon(let n): DBusError("org.proximityd.BlueZSim.Error.UnknownBeacon", "no beacon named \"\(n)\"")
        case .invalidArguments(let m): DBusError("org.proximityd.BlueZSim.Error.InvalidArguments", m)
        }
    }

    public var description: String { dbusError.description }
}

/// The simulator's own control service, on every box bus beside `org.bluez` (never on it).
///
/// Every box bus carries the same service, and each controls the whole simulation, so a script
/// that knows one box's bus can drive them all. It lives on its own connection: restarting a
/// box's bluetoothd does not take it away.
public enum ControlService {
    public static let busName: BusName = "org.proximityd.BlueZSim"
    public static let objectPath: ObjectPath = "/org/proximityd/BlueZSim"
    public static let interfaceName: InterfaceName = "org.proximityd.BlueZSim1"

    /// The keys `Configure` takes.
    public static let configurationKeys = [
        "PathLossExponent", "MeasuredPower", "ShadowingSigma", "AdvertisingInterval", "PacketLoss", "ConnectionLatency",
        "ConnectionFailureRate", "Sensitivity", "BurstLossRate", "BurstDuration", "ReportBatching", "MTU", "ConnectTimeout",
    ]

    static func interface(_ simulator: Simulator) -> DBusInterface {
        let air = simulator.air
        return DBusInterface(interfaceName, methods: [
            DBusMethod("GetState", outputs: [DBusArgument("json", .string)]) { _ in
                [.string(await air.stateJSON())]
            },
            DBusMethod("MoveBox", inputs: [DBusArgument("box", .string), DBusArgument("x", .double), DBusArgument("y", .double),
                                           DBusArgument("z", .double)]) { call in
                let box = call.arguments[0].string ?? ""
                let p = Position(x: call.arguments[1].double ?? 0, y: call.arguments[2].double ?? 0, z: call.arguments[3].double ?? 0)
                try await air.moveBox(box, to: p)
                return []
            },
            DBusMethod("SetAddress", inputs: [DBusArgument("box", .string), DBusArgument("address", .string)]) { call in
                try await air.setAddress(call.arguments[0].string ?? "", to: call.arguments[1].string ?? "")
                return []
            },
            DBusMethod("SetPowered", inputs: [DBusArgument("box", .string), DBusArgument("powered", .boolean)]) { call in
                let box = call.arguments[0].string ?? ""
                guard await air.box(box) != nil else { throw ControlError.unknownBox(box) }
                do {
                    try await air.setPowered(box: box, call.arguments[1].bool ?? true)
                } catch {
                    throw ControlError.invalidArguments("\(box)'s bluetoothd is not running")
                }
                return []
            },
            DBusMethod("RestartBluetoothd", inputs: [DBusArgument("box", .string)]) { call in
                try await simulator.restartBluetoothd(box: call.arguments[0].string ?? "")
                return []
            },
            DBusMethod("AddBeacon", inputs: [DBusArgument("beacon", .string)]) { call in
                try await air.addBeacon(json: call.arguments[0].string ?? "")
                return []
            },
            DBusMethod("RemoveBeacon", inputs: [DBusArgument("name", .string)]) { call in
                try await air.removeBeacon(call.arguments[0].string ?? "")
                return []
            },
            DBusMethod("SetFault", inputs: [DBusArgument("box", .string), DBusArgument("fault", .string)]) { call in
                let box = call.arguments[0].string ?? ""
                switch call.arguments[1].string ?? "" {
                case "deaf": try await air.setDeaf(box: box, true)
                case "clear": try await air.setDeaf(box: box, false)
                case let other: throw ControlError.invalidArguments("unknown fault \"\(other)\": deaf or clear")
                }
                return []
            },
            DBusMethod("Unplug", inputs: [DBusArgument("box", .string)]) { call in
                try await air.unplug(box: call.arguments[0].string ?? "")
                return []
            },
            DBusMethod("Replug", inputs: [DBusArgument("box", .string), DBusArgument("adapter", .string)]) { call in
                try await air.replug(box: call.arguments[0].string ?? "", as: call.arguments[1].string)
                return []
            },
            DBusMethod("PairDevice", inputs: [DBusArgument("device", .string), DBusArgument("box", .string)],
                       outputs: [DBusArgument("shown", .string)]) { call in
                [.string(try await air.pair(device: call.arguments[0].string ?? "", with: call.arguments[1].string ?? ""))]
            },
            DBusMethod("Configure", inputs: [DBusArgument("settings", .dictionary(key: .string, value: .variant))]) { call in
                try await air.configure(call.arguments[0].stringKeyedDictionary?.mapValues(\.unwrapped) ?? [:])
                return []
            },
        ])
    }
}

// MARK: - What the control service does

extension Air {
    /// Puts a box at a fixed point from now on (its trajectory is replaced).
    public func moveBox(_ name: String, to position: Position) throws(ControlError) {
        guard boxes[name] != nil else { throw .unknownBox(name) }
        boxes[name]?.trajectory = Trajectory(fixed: position)
    }

    /// Changes the address a box is heard at, as a resolvable private address rotates: its
    /// connections drop, and from now on scanners hear (and centrals connect to) the new address.
    /// Peers' BlueZ keeps the old device until its temporary timeout. The adapter's own `Address`
    /// (its identity address) does not change.
    public func setAddress(_ name: String, to text: String) throws(ControlError) {
        guard boxes[name] != nil else { throw .unknownBox(name) }
        let address = text.uppercased()
        do {
            try BoxSpec.validate(name: name, address: address)
        } catch {
            throw .invalidArguments(error.message)
        }
        if boxes.contains(where: { $0.key != name && $0.value.spec.address == address })
            || beacons.values.contains(where: { $0.address == address }) {
            throw .invalidArguments("the address \(address) is taken")
        }
        dropConnections(involving: name)
        boxes[name]?.spec.address = address
    }

    /// Adds a beacon given as one entry of a scenario's `beacons` list, in JSON.
    public func addBeacon(json: String) throws(ControlError) {
        let r = radio.parameters
        let wrapper = """
            {"seed": 0, "radio": {"path_loss_exponent": \(r.pathLossExponent), "measured_power": \(r.measuredPower),
             "shadowing_sigma": \(r.shadowingSigma), "advertising_interval": \(r.advertisingInterval),
             "packet_loss": \(r.packetLoss), "connection_latency": \(r.connectionLatency),
             "connection_failure_rate": \(r.connectionFailureRate), "sensitivity": \(r.sensitivity),
             "burst_loss_rate": \(r.burstLossRate), "burst_duration": \(r.burstDuration),
             "report_batching": \(r.reportBatching)},
             "boxes": [{"name": "bluez-sim-placeholder", "address": "00:00:00:00:00:00", "position": [0, 0]}],
             "beacons": [\(json)]}
            """
        let spec: BeaconSpec
        do {
            let parsed = try Scenario.parse(wrapper, format: .json)
            guard let first = parsed.beacons.first else { throw ControlError.invalidArguments("no beacon given") }
            spec = first
        } catch let error as ScenarioError {
            let path = error.path.hasPrefix("beacons[0].") ? String(error.path.dropFirst("beacons[0].".count)) : error.path
            throw .invalidArguments(path.isEmpty || path == "beacons[0]" ? error.message : "\(path): \(error.message)")
        } catch let error as ControlError {
            throw error
        } catch {
            throw .invalidArguments("\(error)")
        }
        if beacons[spec.name] != nil || boxes[spec.name] != nil {
            throw .invalidArguments("the name \"\(spec.name)\" is taken")
        }
        if boxes.values.contains(where: { $0.spec.address == spec.address })
            || beacons.values.contains(where: { $0.address == spec.address }) {
            throw .invalidArguments("the address \(spec.address) is taken")
        }
        beacons[spec.name] = Beacon(spec, seed: seed, defaultInterval: radio.parameters.advertisingInterval, now: clock.now)
        beaconOrder.append(spec.name)
    }

    /// Takes a beacon off the air. Scanners stop hearing it; BlueZ drops it after its temporary
    /// timeout. (Private devices are not beacons: they stay.)
    public func removeBeacon(_ name: String) throws(ControlError) {
        guard let beacon = beacons[name], beacon.rotation == nil else { throw .unknownBeacon(name) }
        beacons[name] = nil
        beaconOrder.removeAll { $0 == name }
    }

    /// Changes radio parameters and link settings (keys in ``ControlService/configurationKeys``).
    public func configure(_ values: [String: DBusValue]) throws(ControlError) {
        var p = radio.parameters
        var s = settings
        for (key, value) in values {
            func number() throws(ControlError) -> Double {
                if let d = value.double { return d }
                if let i = value.integer { return Double(i) }
                throw .invalidArguments("\(key) must be a number")
            }
            switch key {
            case "PathLossExponent": p.pathLossExponent = try number()
            case "MeasuredPower": p.measuredPower = try number()
            case "ShadowingSigma": p.shadowingSigma = try number()
            case "AdvertisingInterval": p.advertisingInterval = try number()
            case "PacketLoss": p.packetLoss = try number()
            case "ConnectionLatency": p.connectionLatency = try number()
            case "ConnectionFailureRate": p.connectionFailureRate = try number()
            case "Sensitivity": p.sensitivity = try number()
            case "BurstLossRate": p.burstLossRate = try number()
            case "BurstDuration": p.burstDuration = try number()
            case "ReportBatching": p.reportBatching = try number()
            case "MTU":
                let m = try number()
                guard (23...517).contains(m) else { throw .invalidArguments("MTU must be 23...517") }
                s.mtu = UInt16(m)
            case "ConnectTimeout":
                let t = try number()
                guard t >= 0, t <= 600 else { throw .invalidArguments("ConnectTimeout must be 0...600 s") }
                s.connectTimeout = t
            default:
                throw .invalidArguments("unknown setting \"\(key)\"; " +
                    "expected one of: \(ControlService.configurationKeys.joined(separator: ", "))")
            }
        }
        do {
            try p.validate()
        } catch {
            throw .invalidArguments(error.description)
        }
        if p.burstLossRate != radio.parameters.burstLossRate || p.burstDuration != radio.parameters.burstDuration {
            linkBursts = [:]  // each link's process starts again from time 0 with the new parameters
        }
        radio = RadioModel(p)
        settings = s
    }

    /// Everything the control service can tell, as one JSON document.
    public func stateJSON() -> String {
        let now = clock.now
        func position(_ p: Position) -> [Double] { [p.x, p.y, p.z] }
        var boxList: [[String: Any]] = []
        for name in boxOrder {
            guard let b = boxes[name] else { continue }
            boxList.append([
                "name": name,
                "address": b.spec.address,
                "adapter": b.spec.adapter,
                "position": position(b.trajectory.position(at: now)),
                "bluetoothd": b.tree != nil,
                "powered": b.adapter.powered,
                "plugged": b.plugged,
                "fault": b.deaf ? "deaf" : "none",
                "discovering": b.adapter.isDiscovering,
                "devices": b.devices.keys.sorted(),
                "advertisements": b.advertisements.map { ["owner": $0.owner, "path": $0.path.rawValue, "type": $0.spec.type.rawValue] },
                "applications": b.applications.map { ["owner": $0.owner, "path": $0.path.rawValue, "services": $0.services.map(\.uuid)] },
                "connections": connections.keys.filter { $0.central == name }.map(\.peripheral).sorted(),
            ])
        }
        let beaconList: [[String: Any]] = beaconOrder.compactMap { name in
            guard let b = beacons[name], b.rotation == nil else { return nil }
            return ["name": name, "address": b.address, "position": position(b.trajectory.position(at: now))]
        }
        // The address a private device advertises from now, though it may not have advertised
        // from it yet.
        let privateList: [[String: Any]] = beaconOrder.compactMap { name in
            guard var b = beacons[name], let rotation = b.rotation else { return nil }
            b.rotate(until: now)
            return ["name": name, "address": b.address, "rotation": rotation.period,
                    "position": position(b.trajectory.position(at: now))]
        }
        let r = radio.parameters
        let document: [String: Any] = [
            "time": now,
            "boxes": boxList,
            "beacons": beaconList,
            "private_devices": privateList,
            "radio": [
                "path_loss_exponent": r.pathLossExponent, "measured_power": r.measuredPower, "shadowing_sigma": r.shadowingSigma,
                "advertising_interval": r.advertisingInterval, "packet_loss": r.packetLoss,
                "connection_latency": r.connectionLatency, "connection_failure_rate": r.connectionFailureRate,
                "sensitivity": r.sensitivity, "burst_loss_rate": r.burstLossRate, "burst_duration": r.burstDuration,
                "report_batching": r.reportBatching,
            ],
            "link": ["mtu": Int(settings.mtu), "connect_timeout": settings.connectTimeout],
            "stats": ["transmissions": stats.transmissions, "reports": stats.reports,
                      "connection_attempts": stats.connectionAttempts,
                      "injected_connection_failures": stats.injectedConnectionFailures],
        ]
        guard let data = try? JSONSerialization.data(withJSONObject: document, options: [.sortedKeys, .withoutEscapingSlashes]) else {
            return "{}"
        }
        return String(decoding: data, as: UTF8.self)
    }
}
