import ArgumentParser
import CBluetooth
import DBusKit
import Foundation
import ProximityNode

/// `proximityctl doctor`: diagnoses a box in plain lines, each problem with its fix.
///
/// The kernel-level checks use libbluetooth (raw HCI sockets and `HCIGETDEVINFO`), so they work
/// when bluetoothd is missing; the rest asks bluetoothd and proximityd over D-Bus.
struct Doctor: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check this box: kernel Bluetooth, controllers, bluetoothd, the adapter, advertising, proximityd and its policy.",
        discussion: """
            Prints one line per check: "ok", "warn" or "FAIL", what was found, and for each problem \
            how to fix it. Exit status: 0 when nothing failed, 1 when a check failed, 64 for a bad \
            argument.
            """)

    @OptionGroup var node: NodeOptions

    @Option(name: .long, help: ArgumentHelp("The adapter proximityd uses.", valueName: "name"))
    var adapter: String = "hci0"

    @Flag(name: .long, help: "Print JSON instead of text.")
    var json = false

    func validate() throws {
        guard adapter.hasPrefix("hci"), let index = Int(adapter.dropFirst(3)), index >= 0, index < 1024 else {
            throw ValidationError("--adapter: '\(adapter)' is not an adapter name such as hci0")
        }
    }

    func run() async throws {
        var report = DoctorReport()
        let index = Int(adapter.dropFirst(3))!
        report.kernel(adapter: adapter, index: index)
        await report.bus(node: node, adapter: adapter)
        if json {
            let data = try JSONSerialization.data(withJSONObject: report.checks.map(\.json), options: [.prettyPrinted, .sortedKeys])
            print(String(decoding: data, as: UTF8.self))
        } else {
            for check in report.checks { print(check.line) }
            let failed = report.checks.filter { $0.status == .fail }.count
            let warned = report.checks.filter { $0.status == .warn }.count
            print(failed == 0 && warned == 0 ? "All checks passed."
                  : "\(failed) problem\(failed == 1 ? "" : "s"), \(warned) warning\(warned == 1 ? "" : "s").")
        }
        if report.checks.contains(where: { $0.status == .fail }) { throw ExitCode(1) }
    }
}

struct DoctorCheck {
    enum Status: String { case ok, warn, fail, skipped }
    let name: String
    let status: Status
    let detail: String
    let fix: String?

    var line: String {
        let tag = switch status {
        case .ok: "ok     "
        case .warn: "warn   "
        case .fail: "FAIL   "
        case .skipped: "skipped"
        }
        var text = "\(tag) \(name): \(detail)"
        if let fix { text += "\n        fix: \(fix)" }
        return text
    }

    var json: [String: Any] {
        var object: [String: Any] = ["check": name, "status": status.rawValue, "detail": detail]
        if let fix { object["fix"] = fix }
        return object
    }
}

struct DoctorReport {
    var checks: [DoctorCheck] = []
    private var kernelHasBluetooth = false
    private var controllerUp: Bool?

    private mutating func add(_ name: String, _ status: DoctorCheck.Status, _ detail: String, fix: String? = nil) {
        checks.append(DoctorCheck(name: name, status: status, detail: detail, fix: fix))
    }

    // MARK: - Kernel (libbluetooth)

    mutating func kernel(adapter: String, index: Int) {
        let probe = proximityd_bt_probe()
        if probe == -EAFNOSUPPORT {
            add("kernel", .fail, "no Bluetooth support: socket(AF_BLUETOOTH) answers \"\(String(cString: strerror(-probe)))\"",
                fix: "load the module (modprobe bluetooth), or boot a kernel built with CONFIG_BT; in a container, the host's kernel decides")
            add("controllers", .skipped, "needs Bluetooth in the kernel")
            return
        }
        kernelHasBluetooth = true
        if probe < 0 {
            add("kernel", .warn, "Bluetooth is there, but a raw HCI socket failed: \(String(cString: strerror(-probe)))",
                fix: "run doctor as root (or with CAP_NET_RAW) for the controller checks")
        } else {
            add("kernel", .ok, "Bluetooth support (AF_BLUETOOTH sockets)")
        }
        var found: [String] = []
        var info = hci_dev_info()
        for id in 0..<16 {
            guard proximityd_hci_info(Int32(id), &info) == 0 else { continue }
            var buffer = [CChar](repeating: 0, count: 18)
            proximityd_hci_address(&info, &buffer)
            let address = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let up = proximityd_hci_is_up(&info) == 1
            let le = proximityd_hci_supports_le(&info) == 1
            found.append("hci\(id) \(address) \(up ? "up" : "down")\(le ? ", LE" : ", no LE")")
            if id == index {
                controllerUp = up
                if !le {
                    add("controller \(adapter)", .fail, "\(address) has no Bluetooth Low Energy",
                        fix: "use an LE (Bluetooth 4.0 or later) adapter, and pass it with proximityd run --adapter")
                } else if !up {
                    add("controller \(adapter)", .fail, "\(address) is down",
                        fix: "rfkill unblock bluetooth; then bluetoothctl power on (or proximityd run --power-on)")
                } else {
                    add("controller \(adapter)", .ok, "\(address) is up and supports LE")
                }
            }
        }
        if found.isEmpty {
            add("controllers", .fail, "the kernel has no Bluetooth controller",
                fix: "plug in an adapter, or check dmesg for its driver and firmware (btusb, hci_uart)")
        } else {
            add("controllers", .ok, found.joined(separator: "; "))
            if controllerUp == nil {
                add("controller \(adapter)", .fail, "no such controller",
                    fix: "pick one of the controllers above with --adapter (and proximityd run --adapter)")
            }
        }
    }

    // MARK: - bluetoothd and proximityd (D-Bus)

    mutating func bus(node: NodeOptions, adapter: String) async {
        let address = try! BusAddress(parsing: node.bus)
        let connection: DBusConnection
        do {
            connection = try await DBusConnection.connect(to: address)
        } catch {
            add("bus", .fail, "cannot connect to the \(node.bus) bus: \(error.message)",
                fix: node.bus == "system" ? "start the system bus (systemctl start dbus)" : "check --bus")
            return
        }
        add("bus", .ok, "connected to the \(node.bus) bus")
        await blueZ(connection, node: node, adapter: adapter)
        await proximityd(connection, node: node)
        await connection.close()
    }

    private mutating func blueZ(_ connection: DBusConnection, node: NodeOptions, adapter: String) async {
        // bluetoothd
        let bluez: BusName? = try? await connection.nameOwner(of: "org.bluez")
        guard let bluez else {
            add("bluetoothd", .fail, "org.bluez is not on the bus",
                fix: kernelHasBluetooth ? "start it: systemctl start bluetooth (package bluez)"
                    : "bluetoothd needs Bluetooth in the kernel (see above); then systemctl start bluetooth")
            add("adapter \(adapter)", .skipped, "needs bluetoothd")
            return
        }
        add("bluetoothd", .ok, "org.bluez is \(bluez)\(await bluetoothdVersion(connection, owner: bluez).map { ", version \($0)" } ?? "")")

        // The adapter, from BlueZ's objects.
        var objects: [String: [String: [String: DBusValue]]] = [:]
        do {
            let reply = try await connection.call(destination: "org.bluez", path: .root, interface: "org.freedesktop.DBus.ObjectManager",
                                                  member: "GetManagedObjects")
            for entry in reply.first?.dictEntries ?? [] {
                guard let path = entry.key.objectPath?.rawValue else { continue }
                var interfaces: [String: [String: DBusValue]] = [:]
                for i in entry.value.dictEntries ?? [] {
                    if let name = i.key.string { interfaces[name] = i.value.stringKeyedDictionary?.mapValues(\.unwrapped) ?? [:] }
                }
                objects[path] = interfaces
            }
        } catch {
            add("adapter \(adapter)", .fail, "cannot list BlueZ's objects: \(error)", fix: "check bluetoothd's log (journalctl -u bluetooth)")
            return
        }
        let path = "/org/bluez/\(adapter)"
        guard let adapterObject = objects[path], let properties = adapterObject["org.bluez.Adapter1"] else {
            let others = objects.filter { $0.value["org.bluez.Adapter1"] != nil }.keys.sorted().map { $0.replacingOccurrences(of: "/org/bluez/", with: "") }
            add("adapter \(adapter)", .fail, "bluetoothd has no \(adapter)\(others.isEmpty ? " (no adapter at all)" : "; it has \(others.joined(separator: ", "))")",
                fix: others.isEmpty ? "check that the controller is up (above) and bluetoothd's log" : "use proximityd run --adapter \(others[0])")
            return
        }
        let addressText = properties["Address"]?.string ?? "?"
        if properties["Powered"]?.bool == true {
            add("adapter \(adapter)", .ok, "\(addressText) is powered")
        } else {
            add("adapter \(adapter)", .fail, "\(addressText) is powered off",
                fix: "bluetoothctl power on, or run proximityd with --power-on (check rfkill list if it will not power on)")
        }
        if let manager = adapterObject["org.bluez.LEAdvertisingManager1"] {
            let supported = manager["SupportedInstances"]?.integer ?? 0
            let active = manager["ActiveInstances"]?.integer ?? 0
            if supported > 0 {
                add("advertising", .ok, "\(supported) instance\(supported == 1 ? "" : "s") free, \(active) in use")
            } else if properties["Powered"]?.bool == true {
                add("advertising", .fail, "no advertising instance free (\(active) in use)",
                    fix: "stop another advertiser (bluetoothctl: advertise off; btmgmt clr-adv) so proximityd can advertise")
            } else {
                add("advertising", .warn, "no instance free while the adapter is off")
            }
        } else {
            add("advertising", .fail, "\(adapter) has no LEAdvertisingManager1",
                fix: "use an LE adapter; with BlueZ older than 5.48 start bluetoothd with --experimental")
        }
    }

    /// bluetoothd's version: its process, found through the bus, asked with `--version`.
    private func bluetoothdVersion(_ connection: DBusConnection, owner: BusName) async -> String? {
        guard let reply = try? await connection.callBus("GetConnectionUnixProcessID", [.string(owner.rawValue)]),
              let pid = reply.first?.integer else { return nil }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"))
            ?? (try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8))?.split(separator: "\0").first.map(String.init)
        guard let executable, executable.hasSuffix("bluetoothd"), FileManager.default.isExecutableFile(atPath: executable) else { return nil }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--version"]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        guard (try? process.run()) != nil else { return nil }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }

    private mutating func proximityd(_ connection: DBusConnection, node: NodeOptions) async {
        let name = try! BusName(node.busName)
        if (try? await connection.nameOwner(of: name)) == nil {
            add("proximityd", .fail, "\(name) is not on the bus",
                fix: node.bus == "system" ? "systemctl start proximityd (or run proximityd run)" : "start proximityd run --bus \(node.bus)")
        } else {
            let properties = (try? await connection.getAllProperties(destination: name, path: NodeAPI.rootPath, interface: NodeAPI.node1)) ?? [:]
            let advertising = properties["Advertising"]?.bool == true
            let discovering = properties["Discovering"]?.bool == true
            let peers = (try? await connection.call(destination: name, path: NodeAPI.rootPath, interface: NodeAPI.node1,
                                                    member: "GetPeers").first?.arrayElements?.count) ?? 0
            let state = "advertising \(advertising ? "yes" : "no"), discovering \(discovering ? "yes" : "no"), \(peers) peer\(peers == 1 ? "" : "s")"
            if advertising && discovering {
                add("proximityd", .ok, "\(name) runs: \(state)")
            } else {
                add("proximityd", .warn, "\(name) runs but is not fully up: \(state)",
                    fix: "see the problems above, and proximityd's log (journalctl -u proximityd)")
            }
        }
        guard node.bus == "system" else {
            add("policy", .skipped, "the bus policy matters on the system bus only")
            return
        }
        let places = ["/usr/share/dbus-1/system.d/org.proximityd.conf", "/etc/dbus-1/system.d/org.proximityd.conf"]
        if let found = places.first(where: { FileManager.default.fileExists(atPath: $0) }) {
            add("policy", .ok, "\(found) is installed")
        } else {
            add("policy", .fail, "org.proximityd.conf is not installed: the system bus will not let proximityd own its name",
                fix: "install dbus/org.proximityd.conf into /usr/share/dbus-1/system.d/ and reload the bus (systemctl reload dbus)")
        }
    }
}
