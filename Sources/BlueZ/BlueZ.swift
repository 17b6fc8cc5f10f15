import DBusKit

/// The names of BlueZ's D-Bus API (`org.bluez`, BlueZ 5.66 `doc/org.bluez.*.rst`) that this module
/// uses, in one place.
public enum BlueZService {
    /// The well-known name bluetoothd owns on the system bus.
    public static let name: BusName = "org.bluez"
    /// The object manager of bluetoothd's tree.
    public static let objectManagerPath: ObjectPath = .root
    /// Every adapter, device and remote GATT object lives below this path.
    public static let rootPath: ObjectPath = "/org/bluez"

    public static let adapterInterface: InterfaceName = "org.bluez.Adapter1"
    public static let deviceInterface: InterfaceName = "org.bluez.Device1"
    public static let gattServiceInterface: InterfaceName = "org.bluez.GattService1"
    public static let gattCharacteristicInterface: InterfaceName = "org.bluez.GattCharacteristic1"
    public static let gattDescriptorInterface: InterfaceName = "org.bluez.GattDescriptor1"
    public static let advertisingManagerInterface: InterfaceName = "org.bluez.LEAdvertisingManager1"
    public static let advertisementInterface: InterfaceName = "org.bluez.LEAdvertisement1"
    public static let gattManagerInterface: InterfaceName = "org.bluez.GattManager1"
}

/// Where proximityd and proximityctl export the objects BlueZ calls back (the advertisement, the
/// GATT applications, the pairing agent): their own tree, with its own object manager, outside
/// `/org/proximityd`, whose object manager lists what the node's clients are meant to see.
public enum BlueZExports {
    /// The root of the objects exported for BlueZ; an object manager is served here.
    public static let root: ObjectPath = "/org/proximityd_bluez"
    public static let advertisement: ObjectPath = "/org/proximityd_bluez/advertisement0"
    public static let gatt: ObjectPath = "/org/proximityd_bluez/gatt"
    public static let enrollmentAdvertisement: ObjectPath = "/org/proximityd_bluez/enrollment"
    public static let enrollmentGatt: ObjectPath = "/org/proximityd_bluez/enrollment_gatt"
    public static let agent: ObjectPath = "/org/proximityd_bluez/agent"
}

/// The UUIDs every proximityd node uses.
public enum ProximityUUIDs {
    /// The *general* service UUID every node advertises and serves its identity under, unless
    /// configured otherwise (`proximityd run --service-uuid`).
    public static let defaultService = "b89491c9-43dd-4d75-bf16-dff381aed967"
    /// The read-only characteristic, inside the general service, whose value is the node's
    /// identity: its specific UUID as 36 lowercase ASCII characters. Generated once for this
    /// project; peers look it up by this UUID, so it never changes.
    public static let identityCharacteristic = "5830b129-79a9-4a7e-be31-5d76f8856c51"
    /// The write-only characteristic, beside the identity, through which a node that connects
    /// to identify a peer introduces itself in the same connection: it writes its own identity,
    /// the UUID's 16 bytes, so one link identifies both nodes (the peer need not connect back).
    public static let helloCharacteristic = "5830b12a-79a9-4a7e-be31-5d76f8856c51"
    /// The read-only characteristic, beside the identity, that gives a reader a fresh challenge
    /// (16 random bytes, for this link only) in the trusted protocol (docs/security.md); the open
    /// protocol answers it with `NotSupported`.
    public static let challengeCharacteristic = "5830b12b-79a9-4a7e-be31-5d76f8856c51"
}
