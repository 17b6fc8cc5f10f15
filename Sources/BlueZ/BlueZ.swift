import DBusKit

/// The typed client of BlueZ (`org.bluez`) and the objects a node exports to it.
public enum BlueZService {
    public static let name: BusName = "org.bluez"
}
