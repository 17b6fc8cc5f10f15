import DBusKit

/// Why ``GattCharacteristic/readAll(maxLength:)`` refused a value.
public enum GattReadError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The peer offered more than `limit` bytes: a hostile or broken peer, not read further.
    case valueTooLong(limit: Int)

    public var description: String {
        switch self {
        case .valueTooLong(let limit): "the characteristic's value is longer than \(limit) bytes"
        }
    }
}

/// A proxy for one remote `org.bluez.GattCharacteristic1`
/// (`/org/bluez/hciN/dev_XX/serviceNNNN/charNNNN`).
public struct GattCharacteristic: Sendable {
    public let connection: DBusConnection
    public let path: ObjectPath
    public let service: BusName
    /// The link's ATT MTU if known (the characteristic's `MTU`); it decides what a short chunk is.
    public var mtu: UInt16?
    /// Per `ReadValue` (BlueZ's ATT transaction timeout is 30 s).
    public var timeout: Duration = .seconds(30)

    /// The smallest ATT MTU of LE, assumed when the MTU is unknown.
    public static let minimumMTU: UInt16 = 23

    public init(connection: DBusConnection, path: ObjectPath, mtu: UInt16? = nil, service: BusName = BlueZService.name) {
        self.connection = connection
        self.path = path
        self.mtu = mtu
        self.service = service
    }

    /// A proxy for a characteristic the mirror knows, with its MTU.
    public init(connection: DBusConnection, _ info: GattCharacteristicInfo, service: BusName = BlueZService.name) {
        self.init(connection: connection, path: info.path, mtu: info.mtu, service: service)
    }

    /// `ReadValue({offset})`: the value from `offset` on, as far as BlueZ reads it in one call.
    /// An offset past the end is refused by the peer (`InvalidArguments` "Invalid offset" once
    /// BlueZ has turned the peer's ATT error into a D-Bus one).
    public func readValue(offset: UInt16 = 0) async throws -> [UInt8] {
        let options: [String: DBusValue] = offset == 0 ? [:] : ["offset": .uint16(offset)]
        let reply = try await connection.callBlueZ(service, path, BlueZService.gattCharacteristicInterface, "ReadValue",
                                                   [.vardict(options)], timeout: timeout)
        guard let first = reply.first, let bytes = PropertyDecoding.bytes(first) else {
            throw BlueZCallError.invalidReply("ReadValue answered '\(reply.map(\.type))', expected 'ay'")
        }
        return bytes
    }

    /// `WriteValue(value, {type: request})`: a write with response, so a refusal comes back as an
    /// error (BlueZ turns the peer's ATT error into a D-Bus one).
    public func writeValue(_ value: [UInt8]) async throws {
        _ = try await connection.callBlueZ(service, path, BlueZService.gattCharacteristicInterface, "WriteValue",
                                           [.bytes(value), .vardict(["type": .string("request")])], timeout: timeout)
    }

    /// Reads the whole value by offset, chunk after chunk, until a chunk shorter than one ATT
    /// read can carry (MTU − 1 bytes) says the value ended, and never more than `maxLength` bytes.
    ///
    /// BlueZ already performs a long read inside one `ReadValue`, so against BlueZ this is
    /// usually one call (two when the value is at least MTU − 1 bytes long: the second, at the end
    /// offset, comes back empty). Reading on by offset keeps it correct against a stack that
    /// answers one ATT read per call. `maxLength` bounds what a hostile peer can make us read: a
    /// longer value fails with ``GattReadError/valueTooLong(limit:)`` as soon as it shows. A
    /// follow-up read refused with `InvalidArguments` (the peer's "Invalid offset" for an offset
    /// at the end) also ends the value.
    public func readAll(maxLength: Int) async throws -> [UInt8] {
        let limit = max(0, min(maxLength, Int(UInt16.max)))
        let fullChunk = Int(max(mtu ?? Self.minimumMTU, Self.minimumMTU)) - 1
        var value: [UInt8] = []
        while true {
            let chunk: [UInt8]
            do {
                chunk = try await readValue(offset: UInt16(value.count))
            } catch BlueZCallError.invalidArguments where !value.isEmpty {
                return value
            }
            guard chunk.count <= limit - value.count else { throw GattReadError.valueTooLong(limit: limit) }
            value += chunk
            if chunk.count < fullChunk { return value }
        }
    }
}
