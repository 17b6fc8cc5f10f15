import DBusKit

/// The names bluetoothd uses on the bus: service, interfaces, paths and errors.
///
/// Error names and messages are BlueZ 5.66's (`src/error.c`), so a client that switches on them
/// behaves the same against the simulator and against bluetoothd.
public enum BlueZ {
    public static let service: BusName = "org.bluez"
    public static let rootPath: ObjectPath = "/org/bluez"

    public static let adapterInterface: InterfaceName = "org.bluez.Adapter1"
    public static let deviceInterface: InterfaceName = "org.bluez.Device1"
    public static let advertisingManagerInterface: InterfaceName = "org.bluez.LEAdvertisingManager1"
    public static let advertisementInterface: InterfaceName = "org.bluez.LEAdvertisement1"
    public static let gattManagerInterface: InterfaceName = "org.bluez.GattManager1"
    public static let gattServiceInterface: InterfaceName = "org.bluez.GattService1"
    public static let gattCharacteristicInterface: InterfaceName = "org.bluez.GattCharacteristic1"
    public static let gattDescriptorInterface: InterfaceName = "org.bluez.GattDescriptor1"
    public static let agentManagerInterface: InterfaceName = "org.bluez.AgentManager1"
    public static let agentInterface: InterfaceName = "org.bluez.Agent1"
    public static let profileManagerInterface: InterfaceName = "org.bluez.ProfileManager1"

    /// `/org/bluez/hci0`.
    public static func adapterPath(_ adapter: String) -> ObjectPath {
        // Adapter names are validated by the scenario (`hciN`).
        (try? ObjectPath("/org/bluez/\(adapter)")) ?? "/org/bluez/hci0"
    }

    /// `/org/bluez/hci0/dev_AA_BB_CC_DD_EE_FF`, as `device_create` builds it.
    public static func devicePath(adapter: String, address: String) -> ObjectPath {
        let element = "dev_" + address.uppercased().replacingOccurrences(of: ":", with: "_")
        return (try? ObjectPath("/org/bluez/\(adapter)/\(element)")) ?? adapterPath(adapter)
    }

    /// The address with `-` for `:`: BlueZ's Alias when a device has no name.
    static func defaultAlias(_ address: String) -> String {
        address.replacingOccurrences(of: ":", with: "-")
    }

    /// BlueZ's LE connection error strings (`src/error.h`), sent as the message of
    /// `org.bluez.Error.Failed`.
    public enum LEConnectionError {
        public static let abortByLocal = "le-connection-abort-by-local"
        public static let canceled = "br-connection-canceled"
    }
}

/// An error reply exactly as bluetoothd sends it.
public struct BlueZError: Error, DBusErrorConvertible, Sendable, Hashable, CustomStringConvertible {
    public let name: String
    public let message: String

    public init(_ reason: String, _ message: String) {
        self.name = "org.bluez.Error." + reason
        self.message = message
    }

    public var dbusError: DBusError {
        DBusError((try? ErrorName(name)) ?? .failed, message)
    }

    public var description: String { "\(name): \(message)" }

    // btd_error_* in src/error.c, with their fixed messages.
    public static let invalidArguments = BlueZError("InvalidArguments", "Invalid arguments in method call")
    public static func invalidArguments(_ message: String) -> BlueZError { BlueZError("InvalidArguments", message) }
    public static let busy = BlueZError("InProgress", "Operation already in progress")
    public static let inProgress = BlueZError("InProgress", "In Progress")
    /// `Powered` set while bluetoothd is changing it itself (5.66 sends it without a message).
    public static let adapterBusy = BlueZError("Busy", "")
    public static let alreadyExists = BlueZError("AlreadyExists", "Already Exists")
    public static let notSupported = BlueZError("NotSupported", "Operation is not supported")
    public static let notConnected = BlueZError("NotConnected", "Not Connected")
    public static let notAvailable = BlueZError("NotAvailable", "Operation currently not available")
    public static let doesNotExist = BlueZError("DoesNotExist", "Does Not Exist")
    public static let notAuthorized = BlueZError("NotAuthorized", "Operation Not Authorized")
    public static func notPermitted(_ message: String) -> BlueZError { BlueZError("NotPermitted", message) }
    public static let notReady = BlueZError("NotReady", "Resource Not Ready")
    public static func failed(_ message: String) -> BlueZError { BlueZError("Failed", message) }
}
