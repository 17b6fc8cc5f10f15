import DBusKit
import ProximityAPI

/// Reading the arguments the node's methods take.
enum BusArguments {
    /// An `a{sv}` as it came, as a dictionary, refusing a key given twice.
    static func uniqueEntries(_ value: DBusVardict, _ what: String) throws(DBusError) -> [String: DBusValue] {
        if let key = value.repeatedKey {
            throw DBusError(ProximityBus.Errors.invalidArguments, "\(what): \(key.debugDescription) is given twice")
        }
        return value.dictionary
    }
}
