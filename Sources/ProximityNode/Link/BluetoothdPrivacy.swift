import Foundation

/// Whether bluetoothd advertises from private addresses (`Privacy` in its `main.conf`, BlueZ
/// 5.66 `src/main.c`): `device`, `network`, `on`, `limited-network` or `limited-device` turn LE
/// privacy on for every adapter; `off`, or nothing, leaves it off.
///
/// A keyed node's member tag is made for the address it advertises from (``KeyedMemberTag``).
/// Under privacy that is a resolvable private address BlueZ does not tell the node, so a tag made
/// for the adapter's identity address would match nothing, and, the same at every rotation of the
/// private address, would link them: with privacy on the node sends no tag. BlueZ's D-Bus API says
/// nothing of privacy, hence the file (world-readable); a bluetoothd started with another file
/// (`-f`), or privacy turned on per controller with btmgmt, is not seen.
public enum BluetoothdPrivacy {
    public static let mainConf = "/etc/bluetooth/main.conf"

    /// Whether `text`, a `main.conf`, turns LE privacy on.
    public static func isOn(mainConf text: String) -> Bool {
        var group = ""
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            if line.hasPrefix("["), line.hasSuffix("]") {
                group = String(line.dropFirst().dropLast())
                continue
            }
            guard group == "General", let eq = line.firstIndex(of: "="),
                  line[..<eq].trimmingCharacters(in: .whitespaces) == "Privacy" else { continue }
            let value = line[line.index(after: eq)...].trimmingCharacters(in: .whitespaces).lowercased()
            return ["device", "network", "on", "limited-network", "limited-device"].contains(value)
        }
        return false
    }

    /// Whether the file at `path` turns privacy on (false when it cannot be read).
    public static func isOn(path: String = mainConf) -> Bool {
        guard let data = FileManager.default.contents(atPath: path), data.count <= 1 << 20 else { return false }
        return isOn(mainConf: String(decoding: data, as: UTF8.self))
    }
}
