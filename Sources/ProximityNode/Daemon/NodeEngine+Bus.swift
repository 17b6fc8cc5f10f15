import BlueZ
import DBusKit
import Foundation
import Logging

extension NodeEngine {
    /// The engine of a node on `connection`: BlueZ through `mirror`, its clients on the same bus,
    /// its files in `state` (`saved`: as loaded from there).
    public init(configuration: NodeConfiguration, identity: UUID, connection: DBusConnection, mirror: BlueZObjectMirror,
                state: StateDirectory, saved: NodeStep.Saved, eventLog: EventLog, clock: any NodeClock = SystemNodeClock(),
                logger: Logger) {
        self.init(configuration: configuration, identity: identity,
                  bluez: BlueZSide(connection: connection, mirror: mirror, configuration: configuration, identity: identity,
                                   logger: logger),
                  clients: BusClients(connection: connection), files: StateFiles(state: state, clock: clock, logger: logger),
                  saved: saved, eventLog: eventLog, clock: clock, logger: logger)
    }
}
