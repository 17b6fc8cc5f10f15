import DBusKit
import Foundation
import ProximityAPI

/// Who is calling: the Unix user the bus knows the sender as, and whether that user is one the
/// node always serves: root, the daemon's own user, and the members of group `proximityd` (the
/// group `dbus/org.proximityd.conf` lets call everything). Everyone else shares what is left of a
/// bounded resource, with a limit per user (`StartRecording`).
struct CallerCredentials: Sendable, Hashable {
    /// The sender's Unix user id (`org.freedesktop.DBus.GetConnectionUnixUser`).
    var uid: UInt32
    var privileged: Bool

    /// The group whose members the node always serves.
    static let operatorGroup = "proximityd"

    /// The credentials of `sender`, asked of the bus; `Failed` if the bus cannot say.
    static func of(_ sender: BusName, on connection: DBusConnection) async throws(DBusError) -> CallerCredentials {
        let reply: [DBusValue]
        do {
            reply = try await connection.call(destination: .bus, path: "/org/freedesktop/DBus", interface: .bus,
                                              member: "GetConnectionUnixUser", [.string(sender.rawValue)], timeout: .seconds(5))
        } catch {
            throw DBusError(ProximityBus.Errors.failed, "cannot tell who \(sender) is: \(error)")
        }
        guard case .uint32(let uid)? = reply.first else {
            throw DBusError(ProximityBus.Errors.failed, "cannot tell who \(sender) is: the bus answered \(reply)")
        }
        return CallerCredentials(uid: uid, privileged: isPrivileged(uid))
    }

    /// Root, this process's user, or a member of ``operatorGroup`` (as its primary group or a
    /// supplementary one, from the user and group databases).
    static func isPrivileged(_ uid: UInt32) -> Bool {
        if uid == 0 || uid == getuid() { return true }
        guard let group = getgrnam(operatorGroup) else { return false }
        let gid = group.pointee.gr_gid
        var buffer = [CChar](repeating: 0, count: 16 << 10)
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        guard getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return false }
        if entry.pw_gid == gid { return true }
        var count: Int32 = 64
        var groups = [gid_t](repeating: 0, count: Int(count))
        if getgrouplist(entry.pw_name, entry.pw_gid, &groups, &count) < 0 {
            groups = [gid_t](repeating: 0, count: Int(count))
            guard getgrouplist(entry.pw_name, entry.pw_gid, &groups, &count) >= 0 else { return false }
        }
        return groups.prefix(Int(count)).contains(gid)
    }
}
