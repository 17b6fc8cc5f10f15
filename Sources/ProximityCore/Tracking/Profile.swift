/// The profile: named string values (`a{ss}`), the tracker's and the ones clients set, as the
/// seed's client-side user profile holds them. Pure: a change returns what it changed.
public struct Profile: Sendable, Hashable {
    public private(set) var attributes: [String: String]

    /// The most attributes, the longest key and value (bytes).
    public static let maxAttributes = 1000
    public static let maxKeyLength = 255
    public static let maxValueLength = 4096

    public init(_ attributes: [String: String] = [:]) {
        self.attributes = attributes
    }

    public subscript(key: String) -> String? { attributes[key] }

    /// Why `key` cannot name an attribute, or nil.
    public static func problem(key: String) -> String? {
        identifierProblem(key, called: "the attribute key")
    }

    /// Why `value` cannot be an attribute's value, or nil.
    public static func problem(value: String) -> String? {
        value.utf8.count > maxValueLength ? "the value is longer than \(maxValueLength) bytes" : nil
    }

    /// Sets each key with a value and removes each without one. Returns the keys that changed,
    /// with their new values (nil: removed). Throws, changing nothing, when the profile would
    /// hold more than ``maxAttributes``.
    public mutating func apply(_ changes: [String: String?]) throws(ProfileFull) -> [String: String?] {
        var next = attributes
        var changed: [String: String?] = [:]
        for (key, value) in changes.sorted(by: { $0.key < $1.key }) where next[key] != value {
            next[key] = value
            changed[key] = .some(value)
        }
        guard next.count <= Self.maxAttributes || next.count <= attributes.count else { throw ProfileFull(limit: Self.maxAttributes) }
        attributes = next
        return changed
    }
}

public struct ProfileFull: Error, Sendable, Hashable {
    public var limit: Int
}
