import CBluetooth
import Foundation

/// An error number of the C library (`errno`), as the kernel answered a call.
public struct Errno: Error, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: CInt

    public init(rawValue: CInt) {
        self.rawValue = rawValue
    }

    /// `EAFNOSUPPORT`: the kernel has no such address family (no Bluetooth).
    public static let addressFamilyNotSupported = Errno(rawValue: EAFNOSUPPORT)
    /// `ENODEV`: no such device.
    public static let noSuchDevice = Errno(rawValue: ENODEV)

    /// The C library's text for it. The corresponding C function is `strerror`.
    public var description: String { String(cString: strerror(rawValue)) }
}

/// A raw HCI socket (`AF_BLUETOOTH`, `BTPROTO_HCI`, not bound to a controller), owned: it is
/// closed when the value goes away. Opening one tells whether the kernel has Bluetooth at all
/// (``Errno/addressFamilyNotSupported`` when it has not), without bluetoothd; on it the kernel
/// describes its controllers.
public struct HCISocket: ~Copyable {
    /// The file descriptor, valid for the value's lifetime.
    public let rawValue: CInt

    /// Opens the socket, close-on-exec.
    ///
    /// The corresponding C function is `socket`, with `AF_BLUETOOTH`, `SOCK_RAW | SOCK_CLOEXEC`
    /// and `BTPROTO_HCI`.
    public init() throws(Errno) {
        let fd = socket(AF_BLUETOOTH, Int32(SOCK_RAW.rawValue) | Int32(SOCK_CLOEXEC.rawValue), BTPROTO_HCI)
        guard fd >= 0 else { throw Errno(rawValue: errno) }
        rawValue = fd
    }

    /// What the kernel says of controller hci`id`: ``Errno/noSuchDevice`` if there is none.
    ///
    /// The corresponding C function is `ioctl` with `HCIGETDEVINFO` (as libbluetooth's
    /// `hci_devinfo` does), through `proximityd_hci_devinfo`.
    public func deviceInfo(_ id: Int) throws(Errno) -> HCIDeviceInfo {
        var info = hci_dev_info()
        let result = proximityd_hci_devinfo(rawValue, CInt(id), &info)
        guard result == 0 else { throw Errno(rawValue: -result) }
        return HCIDeviceInfo(info)
    }

    /// The controllers hci0 to hci`limit - 1` the kernel knows, in order.
    public func controllers(limit: Int = 16) -> [HCIDeviceInfo] {
        (0..<limit).compactMap { try? deviceInfo($0) }
    }

    /// The corresponding C function is `close`.
    deinit {
        close(rawValue)
    }
}

/// One controller as the kernel describes it, decoded from a `struct hci_dev_info` (a value: it
/// owns nothing).
public struct HCIDeviceInfo: Sendable, Hashable {
    /// N of hciN.
    public var id: Int
    /// `hci0`.
    public var name: String
    /// `AA:BB:CC:DD:EE:FF`.
    public var address: String
    /// The `HCI_UP` flag.
    public var isUp: Bool
    /// The LMP feature "LE supported (controller)".
    public var supportsLE: Bool

    /// Decodes the C structure. The address is written by `ba2str`.
    init(_ info: hci_dev_info) {
        var info = info
        id = Int(info.dev_id)
        name = withUnsafeBytes(of: info.name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        var buffer = [CChar](repeating: 0, count: 18)
        _ = ba2str(&info.bdaddr, &buffer)
        address = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        isUp = proximityd_hci_is_up(&info) == 1
        supportsLE = proximityd_hci_supports_le(&info) == 1
    }
}
