import DBusKit
import Foundation
import Logging

/// What a node advertises: the general service UUID, a local name, optionally manufacturer data
/// (the node's measured power) and its identity.
public struct AdvertisementContent: Sendable, Hashable {
    /// The general service UUID every node advertises (peers filter their scan on it).
    public var serviceUUID: String
    /// `ManufacturerData`, company identifier → the bytes after it: the node's measured power
    /// (`NodePowerFrame`). Carried when it fits, before the identity.
    public var manufacturerData: [UInt16: [UInt8]]
    /// Shown by scanners; shortened to fit the scan response.
    public var localName: String?
    /// The node's identity, offered in `ServiceData` when it fits (peers that read it there need
    /// no connection). Its 16 bytes, in the UUID's byte order.
    public var identity: UUID?
    /// The `ServiceData` key for the identity: the general UUID by default; a 16-bit form costs
    /// 14 bytes less.
    public var identityServiceDataUUID: String?

    public init(serviceUUID: String, localName: String? = nil, manufacturerData: [UInt16: [UInt8]] = [:], identity: UUID? = nil,
                identityServiceDataUUID: String? = nil) {
        self.serviceUUID = serviceUUID
        self.manufacturerData = manufacturerData
        self.localName = localName
        self.identity = identity
        self.identityServiceDataUUID = identityServiceDataUUID
    }
}

/// The advertisement as it will be exported, after fitting it into 31 bytes.
public struct AdvertisementPlan: Sendable, Hashable {
    /// The `LEAdvertisement1` properties.
    public var properties: [String: DBusValue]
    /// The name as advertised (shortened), nil if none.
    public var localName: String?
    /// Whether `ManufacturerData` is carried (all of the content's, or none).
    public var carriesManufacturerData: Bool
    /// Whether `ServiceData` carries the identity.
    public var carriesIdentity: Bool
    /// The payload as BlueZ will size it.
    public var payload: LegacyAdvertisingPayload
}

public enum AdvertisementError: Error, Sendable, Hashable, CustomStringConvertible {
    case invalidUUID(String)
    /// Even the service UUID alone does not fit (cannot happen with one UUID; kept for safety).
    case doesNotFit(length: Int, budget: Int)

    public var description: String {
        switch self {
        case .invalidUUID(let u): "'\(u)' is not a Bluetooth UUID"
        case .doesNotFit(let length, let budget): "the advertisement needs \(length) bytes, BlueZ allows \(budget)"
        }
    }
}

/// The node's exported `org.bluez.LEAdvertisement1`.
///
/// A connectable (`peripheral`) advertisement with the general service UUID in `ServiceUUIDs`,
/// the local name (in the scan response, shortened to 29 bytes), `ManufacturerData` (the node's
/// measured power) when it fits, and the identity in `ServiceData` only when it still fits.
/// Properties never change while exported (BlueZ reads them once at registration); export a new
/// one to change them.
///
/// BlueZ calls `Release` when it drops the advertisement itself (bluetoothd stopping or
/// restarting, a `Timeout` running out); each call yields one element on ``releases``, so the
/// owner can register again once BlueZ is back. `UnregisterAdvertisement` does not call it. A
/// `Release` from anyone but the owner of `org.bluez` is refused (``BlueZCallers``).
public final class Advertisement: Sendable {
    public static let defaultPath: ObjectPath = BlueZExports.advertisement

    public let path: ObjectPath
    public let plan: AdvertisementPlan
    /// One element per `Release` from BlueZ.
    public let releases: AsyncStream<Void>
    private let object: DBusObject

    private init(path: ObjectPath, plan: AdvertisementPlan, releases: AsyncStream<Void>, object: DBusObject) {
        self.path = path
        self.plan = plan
        self.releases = releases
        self.object = object
    }

    /// Fits `content` into the legacy budget: the service UUID always; the manufacturer data if it
    /// fits; the identity in `ServiceData` only if it still fits; the name shortened for the scan
    /// response.
    ///
    /// `adapterDiscoverable` true (the default) keeps the 3 bytes of flags the kernel adds when
    /// the adapter is discoverable, which it may become at any time.
    public static func plan(_ content: AdvertisementContent,
                            adapterDiscoverable: Bool = true) throws(AdvertisementError) -> AdvertisementPlan {
        guard let service = BluetoothUUID(content.serviceUUID) else { throw .invalidUUID(content.serviceUUID) }
        var payload = LegacyAdvertisingPayload(peripheral: true, serviceUUIDs: [service])
        let budget = payload.maxLength(adapterDiscoverable: adapterDiscoverable)
        guard payload.length <= budget else { throw .doesNotFit(length: payload.length, budget: budget) }
        var properties: [String: DBusValue] = [
            "Type": .string("peripheral"),
            "ServiceUUIDs": .strings([content.serviceUUID.lowercased()]),
        ]
        var carriesManufacturerData = false
        if !content.manufacturerData.isEmpty {
            var candidate = payload
            candidate.manufacturerData = content.manufacturerData
            if candidate.fits(adapterDiscoverable: adapterDiscoverable) {
                payload = candidate
                carriesManufacturerData = true
                properties["ManufacturerData"] = .dictionary(key: .uint16, value: .variant, content.manufacturerData.keys.sorted().map {
                    .init(.uint16($0), .variant(.bytes(content.manufacturerData[$0]!)))
                })
            }
        }
        var carriesIdentity = false
        if let identity = content.identity {
            let keyText = content.identityServiceDataUUID ?? content.serviceUUID
            guard let key = BluetoothUUID(keyText) else { throw .invalidUUID(keyText) }
            var candidate = payload
            candidate.serviceData[key] = identity.bytes
            if candidate.fits(adapterDiscoverable: adapterDiscoverable) {
                payload = candidate
                carriesIdentity = true
                properties["ServiceData"] = .dictionary(key: .string, value: .variant, [
                    .init(.string(keyText.lowercased()), .variant(.bytes(identity.bytes))),
                ])
            }
        }
        let name = content.localName.flatMap { LegacyAdvertisingPayload.truncatedLocalName($0) }
        if let name { properties["LocalName"] = .string(name) }
        return AdvertisementPlan(properties: properties, localName: name, carriesManufacturerData: carriesManufacturerData,
                                 carriesIdentity: carriesIdentity, payload: payload)
    }

    /// Plans `content` and exports it at `path` on `connection`. Register it with
    /// ``register(with:)``. `Release` is taken from the owner of `org.bluez` only (`callers`).
    public static func export(on connection: DBusConnection, at path: ObjectPath = defaultPath, content: AdvertisementContent,
                              adapterDiscoverable: Bool = true, callers: BlueZCallers? = nil,
                              logger: Logger = Logger(label: "proximityd.bluez")) async throws -> Advertisement {
        try await export(on: connection, at: path, plan: try plan(content, adapterDiscoverable: adapterDiscoverable),
                         callers: callers, logger: logger)
    }

    /// The advertisement a phone lists in its Bluetooth settings while the box waits to pair
    /// (`proximityctl irks enroll`): connectable, with the LE General Discoverable flag, `name` in
    /// the scan response (shortened to fit) and `appearance` (0x0080, a computer, by default), so
    /// the phone shows the name with an icon.
    public static func pairablePlan(name: String, appearance: UInt16 = 0x0080, serviceUUIDs: [String] = []) -> AdvertisementPlan {
        var properties: [String: DBusValue] = [
            "Type": .string("peripheral"),
            "Discoverable": .boolean(true),
            "Appearance": .uint16(appearance),
        ]
        let uuids = serviceUUIDs.compactMap(BluetoothUUID.init)
        if !uuids.isEmpty { properties["ServiceUUIDs"] = .strings(serviceUUIDs.map { $0.lowercased() }) }
        let shown = LegacyAdvertisingPayload.truncatedLocalName(name)
        if let shown { properties["LocalName"] = .string(shown) }
        return AdvertisementPlan(properties: properties, localName: shown, carriesManufacturerData: false, carriesIdentity: false,
                                 payload: LegacyAdvertisingPayload(peripheral: true, serviceUUIDs: uuids))
    }

    /// Exports a planned advertisement at `path` on `connection`.
    public static func export(on connection: DBusConnection, at path: ObjectPath, plan: AdvertisementPlan, callers: BlueZCallers? = nil,
                              logger: Logger = Logger(label: "proximityd.bluez")) async throws -> Advertisement {
        let callers = callers ?? BlueZCallers(connection: connection)
        let (releases, sink) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .unbounded)
        let declared = plan.properties.sorted { $0.key < $1.key }.map {
            DBusProperty($0.key, $0.value.type, $0.value, changeSignal: .const)
        }
        let interface = DBusInterface(BlueZService.advertisementInterface, methods: [
            DBusMethod("Release") { call in
                do { try await callers.require(call) } catch {
                    logger.warning("refused a Release not from bluetoothd", metadata: ["dbus.sender": "\(call.sender?.rawValue ?? "")"])
                    throw error
                }
                logger.info("BlueZ released the advertisement",
                            metadata: ["dbus.path": "\(path)", "dbus.sender": "\(call.sender?.rawValue ?? "")"])
                sink.yield()
                return []
            },
        ], properties: declared)
        let object = try await connection.export([interface], at: path)
        return Advertisement(path: path, plan: plan, releases: releases, object: object)
    }

    /// `RegisterAdvertisement` with an adapter.
    public func register(with manager: LEAdvertisingManager) async throws {
        try await manager.register(path)
    }

    /// `UnregisterAdvertisement` with an adapter.
    public func unregister(from manager: LEAdvertisingManager) async throws {
        try await manager.unregister(path)
    }

    /// Removes the object from the bus (BlueZ drops a registration whose object vanished).
    public func unexport() async {
        await object.unexport()
    }
}

extension UUID {
    /// The 16 bytes, in the order of the textual form.
    var bytes: [UInt8] {
        withUnsafeBytes(of: uuid) { Array($0) }
    }
}
