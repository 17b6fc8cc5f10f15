/// What the doctor reads of bluetoothd's `main.conf` (BlueZ 5.66 `src/main.conf`): the
/// `Privacy` key of `[General]`, whose default is `off`.
public enum BlueZMainConf {
    public static let defaultPath = "/etc/bluetooth/main.conf"

    /// `Privacy`'s value in `[General]` of `text`, lowercased; nil when the key is not set (or is
    /// commented out, as in Debian's shipped file).
    public static func privacy(_ text: String) -> String? {
        var section = ""
        var value: String?
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                section = String(line.dropFirst().dropLast()).trimmingCharacters(in: .whitespaces)
                continue
            }
            guard section == "General", let equals = line.firstIndex(of: "=") else { continue }
            if line[..<equals].trimmingCharacters(in: .whitespaces) == "Privacy" {
                value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces).lowercased()
            }
        }
        return value
    }

    /// Whether a `Privacy` value makes the adapter advertise from resolvable private addresses.
    public static func isOn(_ value: String?) -> Bool {
        guard let value else { return false }
        return ["on", "network", "device", "limited-network", "limited-device"].contains(value)
    }
}
