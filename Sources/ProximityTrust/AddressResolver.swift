import LibCrypto
import ProximityCore

/// The IRKs a node knows (`irks:`), by name, and which of them each address it hears resolves to.
/// An address is tried against every key once; its answer is remembered (a device keeps an
/// address for minutes, and is heard many times a second), up to ``cacheLimit`` addresses, the
/// oldest forgotten first.
public struct AddressResolver: PrivateAddressResolving {
    public private(set) var keys: [(name: String, key: IdentityResolvingKey)]
    private var cache: [String: String?] = [:]
    private var order: [String] = []
    private var orderStart = 0
    /// The most addresses remembered.
    public static let cacheLimit = 4096

    public init(keys: [String: IdentityResolvingKey]) {
        self.keys = keys.sorted { $0.key < $1.key }.map { (name: $0.key, key: $0.value) }
    }

    /// The name of the IRK that made `address` (`AA:BB:…`), or nil (not a resolvable private
    /// address, or none of the keys made it).
    public mutating func resolve(_ address: String) -> String? {
        // Only a resolvable private address (its first digit 4 to 7) is worth a look: public and
        // static addresses (beacons) cost one byte's test, and take no place in the cache.
        guard let first = address.utf8.first, first >= UInt8(ascii: "4"), first <= UInt8(ascii: "7") else { return nil }
        if let known = cache[address] { return known }
        var name: String?
        if let bytes = IdentityResolvingKey.addressBytes(address), IdentityResolvingKey.isResolvable(bytes) {
            name = keys.first { $0.key.resolves(bytes) }?.name
        }
        remember(address, name)
        return name
    }

    private mutating func remember(_ address: String, _ name: String?) {
        if order.count - orderStart >= Self.cacheLimit {
            cache[order[orderStart]] = nil
            orderStart += 1
            if orderStart > Self.cacheLimit {
                order.removeFirst(orderStart)
                orderStart = 0
            }
        }
        cache[address] = .some(name)
        order.append(address)
    }
}
