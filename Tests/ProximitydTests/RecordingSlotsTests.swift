import Foundation
import ProximityAPI
import ProximityTesting
import Testing

/// `StartRecording` is open to everyone (the bus policy), so its slots are shared out: a user
/// outside group proximityd records from at most `maxRecordersPerUser` clients, and root and the
/// group have slots of their own.
@Suite("recording slots: per user, and root always served")
struct RecordingSlotsTests {
    /// A client of `address` as user nobody (65534, no groups) that calls StartRecording, prints
    /// "ok" or the error's name and message, and stays on the bus (so its recording stays).
    static let client = """
        import sys, time, dbus
        bus = dbus.bus.BusConnection(sys.argv[1])
        node = bus.get_object("org.proximityd", "/org/proximityd")
        try:
            node.StartRecording(dbus.Array([], signature="s"), dbus_interface="org.proximityd.Node1")
            print("ok", flush=True)
        except dbus.exceptions.DBusException as e:
            print("refused", e.get_dbus_name(), e.get_dbus_message(), flush=True)
        time.sleep(120)
        """

    @Test("a user outside group proximityd gets maxRecordersPerUser (2) slots, no more; root is still served")
    func perUser() async throws {
        try await withBox { box in
            let daemon = try await box.startDaemon()
            var clients: [ManagedProcess] = []
            defer { for client in clients { client.signal(SIGKILL) } }
            for _ in 0 ... ProximityBus.Node1.maxRecordersPerUser {
                let client = try ManagedProcess("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--",
                                                                     "/usr/bin/python3", "-c", Self.client, box.address])
                clients.append(client)
                try await client.waitForOutput(containing: "\n", timeout: .seconds(30))
            }
            let answers = clients.map { $0.stdout.trimmed }
            #expect(answers.dropLast().allSatisfy { $0 == "ok" }, "\(answers)")
            #expect(answers.last?.hasPrefix("refused org.proximityd.Error.LimitReached user 65534 records from 2 clients already") == true,
                    "\(answers)")
            // Root (this test's user) is served while nobody holds its slots.
            let root = try await box.busctl(["call", "org.proximityd", "/org/proximityd", "org.proximityd.Node1", "StartRecording", "as", "0"])
            #expect(root.status == 0, "\(root)")
            #expect(daemon.isRunning)
            await daemon.stop()
        }
    }
}
