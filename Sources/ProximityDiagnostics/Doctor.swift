import BlueZ
import DBusKit
import Foundation
import ProximityAPI

/// Diagnoses a box in plain lines, each problem with its fix: kernel Bluetooth, controllers,
/// bluetoothd, the adapter, advertising, proximityd and its bus policy (`proximityctl doctor`).
///
/// The kernel-level checks use libbluetooth (``HCISocket``), so they work when bluetoothd is
/// missing; the rest asks bluetoothd (one ``BlueZSnapshot``) and proximityd (``NodeProxy``) over
/// D-Bus.
public struct Doctor: Sendable {
    /// The bus of bluetoothd and proximityd.
    public var bus: BusAddress
    /// proximityd's well-known name.
    public var busName: BusName
    /// The adapter proximityd uses, `hciN`.
    public var adapter: String
    /// bluetoothd's configuration file, for its `Privacy` setting.
    public var bluezConfig: String

    public init(bus: BusAddress = .system, busName: BusName = ProximityBus.defaultBusName, adapter: String = "hci0",
                bluezConfig: String = BlueZMainConf.defaultPath) {
        self.bus = bus
        self.busName = busName
        self.adapter = adapter
        self.bluezConfig = bluezConfig
    }

    /// N of an adapter name `hciN` (N below 1024), nil for anything else.
    public static func adapterIndex(_ name: String) -> Int? {
        guard name.hasPrefix("hci"), let index = Int(name.dropFirst(3)), index >= 0, index < 1024 else { return nil }
        return index
    }

    /// Runs every check. Never throws: what cannot be checked is a check that failed or was
    /// skipped.
    public func run() async -> DoctorReport {
        var run = DoctorRun(doctor: self)
        run.kernel()
        await run.bus()
        return run.report
    }
}

/// One run of the checks: the report so far and what later checks need from earlier ones.
struct DoctorRun {
    let doctor: Doctor
    var report = DoctorReport()
    private var kernelHasBluetooth = false

    init(doctor: Doctor) {
        self.doctor = doctor
    }

    private var adapter: String { doctor.adapter }
    private var bus: BusAddress { doctor.bus }

    private mutating func add(_ name: String, _ status: DoctorCheck.Status, _ detail: String, fix: String? = nil) {
        report.add(name, status, detail, fix: fix)
    }

    // MARK: - Kernel (libbluetooth)

    mutating func kernel() {
        let found: [HCIDeviceInfo]
        do throws(Errno) {
            let socket = try HCISocket()
            kernelHasBluetooth = true
            add("kernel", .ok, "Bluetooth support (AF_BLUETOOTH sockets)")
            found = socket.controllers()
        } catch let error where error == .addressFamilyNotSupported {
            add("kernel", .fail, "no Bluetooth support: socket(AF_BLUETOOTH) answers \"\(error)\"",
                fix: "load the module (modprobe bluetooth), or boot a kernel built with CONFIG_BT; " +
                    "in a container, the host's kernel decides")
            add("controllers", .skipped, "needs Bluetooth in the kernel")
            return
        } catch {
            kernelHasBluetooth = true
            add("kernel", .warn, "Bluetooth is there, but a raw HCI socket failed: \(error)",
                fix: "run doctor as root (or with CAP_NET_RAW) for the controller checks")
            found = []
        }
        let index = Doctor.adapterIndex(adapter)
        if found.isEmpty {
            add("controllers", .fail, "the kernel has no Bluetooth controller",
                fix: "plug in an adapter, or check dmesg for its driver and firmware (btusb, hci_uart)")
            return
        }
        var mine: HCIDeviceInfo?
        for controller in found {
            guard controller.id == index else { continue }
            mine = controller
            if !controller.supportsLE {
                add("controller \(adapter)", .fail, "\(controller.address) has no Bluetooth Low Energy",
                    fix: "use an LE (Bluetooth 4.0 or later) adapter, and pass it with proximityd run --adapter")
            } else if !controller.isUp {
                add("controller \(adapter)", .fail, "\(controller.address) is down",
                    fix: "rfkill unblock bluetooth; then bluetoothctl power on (or proximityd run --power-on)")
            } else {
                add("controller \(adapter)", .ok, "\(controller.address) is up and supports LE")
            }
        }
        add("controllers", .ok, found.map { "hci\($0.id) \($0.address) \($0.isUp ? "up" : "down")\($0.supportsLE ? ", LE" : ", no LE")" }
            .joined(separator: "; "))
        if mine == nil {
            add("controller \(adapter)", .fail, "no such controller",
                fix: "pick one of the controllers above with --adapter (and proximityd run --adapter)")
        }
    }

    // MARK: - bluetoothd and proximityd (D-Bus)

    mutating func bus() async {
        let connection: DBusConnection
        do {
            connection = try await DBusConnection.connect(to: bus)
        } catch {
            add("bus", .fail, "cannot connect to the \(bus) bus: \(error.message)",
                fix: bus == .system ? "start the system bus (systemctl start dbus)" : "check --bus")
            return
        }
        add("bus", .ok, "connected to the \(bus) bus")
        await blueZ(connection)
        await proximityd(connection)
        await connection.close()
    }

    private mutating func blueZ(_ connection: DBusConnection) async {
        // bluetoothd
        let bluez: BusName? = try? await connection.nameOwner(of: BlueZService.name)
        guard let bluez else {
            add("bluetoothd", .fail, "org.bluez is not on the bus",
                fix: kernelHasBluetooth ? "start it: systemctl start bluetooth (package bluez)"
                    : "bluetoothd needs Bluetooth in the kernel (see above); then systemctl start bluetooth")
            add("adapter \(adapter)", .skipped, "needs bluetoothd")
            return
        }
        add("bluetoothd", .ok, "org.bluez is \(bluez)\(await bluetoothdVersion(connection, owner: bluez).map { ", version \($0)" } ?? "")")
        privacy()

        // The adapter, from BlueZ's objects.
        let snapshot: BlueZSnapshot
        do {
            snapshot = try await BlueZSnapshot.take(on: connection)
        } catch {
            add("adapter \(adapter)", .fail, "cannot list BlueZ's objects: \(error)",
                fix: "check bluetoothd's log (journalctl -u bluetooth)")
            return
        }
        let path = BlueZService.rootPath.appending(escaped: adapter)
        guard let info = snapshot.adapter(at: path) else {
            let others = snapshot.adapters.map { $0.path.rawValue.replacingOccurrences(of: BlueZService.rootPath.rawValue + "/", with: "") }
            add("adapter \(adapter)", .fail,
                "bluetoothd has no \(adapter)\(others.isEmpty ? " (no adapter at all)" : "; it has \(others.joined(separator: ", "))")",
                fix: others.isEmpty ? "check that the controller is up (above) and bluetoothd's log"
                    : "use proximityd run --adapter \(others[0])")
            return
        }
        let address = info.address.isEmpty ? "?" : info.address
        if info.powered {
            add("adapter \(adapter)", .ok, "\(address) is powered")
        } else {
            add("adapter \(adapter)", .fail, "\(address) is powered off",
                fix: "bluetoothctl power on, or run proximityd with --power-on (check rfkill list if it will not power on)")
        }
        if let manager = snapshot.advertisingManager(at: path) {
            let supported = manager.supportedInstances
            let active = manager.activeInstances
            if supported > 0 {
                add("advertising", .ok, "\(supported) instance\(supported == 1 ? "" : "s") free, \(active) in use")
            } else if info.powered {
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

    /// BlueZ's privacy (`Privacy=` in main.conf): with it on, the adapter advertises from a
    /// resolvable private address that changes, so a node of a trusted fleet carries nothing
    /// stable on the air (docs/security.md). Off is a warning: an open node does not need it.
    private mutating func privacy() {
        let file = doctor.bluezConfig
        let fix = "set Privacy = device under [General] in \(file), then systemctl restart bluetooth " +
            "(BlueZ uses it where the controller supports privacy)"
        guard let text = try? String(contentsOfFile: file, encoding: .utf8) else {
            add("privacy", .warn,
                "cannot read \(file): BlueZ's default, Privacy off, is assumed; the adapter advertises from its public address, " +
                    "a stable identifier",
                fix: fix)
            return
        }
        let value = BlueZMainConf.privacy(text)
        if BlueZMainConf.isOn(value) {
            add("privacy", .ok, "Privacy = \(value!) in \(file): the adapter advertises from resolvable private addresses")
        } else {
            add("privacy", .warn,
                "Privacy is \(value ?? "not set (off)") in \(file): the adapter advertises from its public address, a stable identifier " +
                    "(it matters for a trusted fleet: docs/security.md)",
                fix: fix)
        }
    }

    /// bluetoothd's version: its process, found through the bus, asked with `--version`.
    private func bluetoothdVersion(_ connection: DBusConnection, owner: BusName) async -> String? {
        guard let reply = try? await connection.callBus("GetConnectionUnixProcessID", [.string(owner.rawValue)]),
              let pid = reply.first?.integer else { return nil }
        let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"))
            ?? (try? String(contentsOfFile: "/proc/\(pid)/cmdline", encoding: .utf8))?.split(separator: "\0").first.map(String.init)
        guard let executable, executable.hasSuffix("bluetoothd"), FileManager.default.isExecutableFile(atPath: executable) else {
            return nil
        }
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

    private mutating func proximityd(_ connection: DBusConnection) async {
        let name = doctor.busName
        if let node = try? await NodeProxy.find(on: connection, bus: bus, name: name) {
            let properties = try? await node.properties()
            let advertising = properties?.advertising == true
            let discovering = properties?.discovering == true
            let peers = (try? await node.peers().count) ?? 0
            let state = "advertising \(advertising ? "yes" : "no"), discovering \(discovering ? "yes" : "no"), " +
                "\(peers) peer\(peers == 1 ? "" : "s")"
            let health = properties?.health ?? ""
            if health == "recovering" || health == "failed" {
                add("radio", health == "failed" ? .fail : .warn,
                    "the node's radio watchdog says \(health): \(properties?.healthDetail ?? "")",
                    fix: health == "failed" ? "check the adapter (dmesg, bluetoothctl show); unplug and replug a USB dongle" : nil)
            }
            if advertising && discovering {
                add("proximityd", .ok, "\(name) runs: \(state)")
            } else {
                add("proximityd", .warn, "\(name) runs but is not fully up: \(state)",
                    fix: "see the problems above, and proximityd's log (journalctl -u proximityd)")
            }
        } else {
            add("proximityd", .fail, "\(name) is not on the bus",
                fix: bus == .system ? "systemctl start proximityd (or run proximityd run)" : "start proximityd run --bus \(bus)")
        }
        guard bus == .system else {
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
