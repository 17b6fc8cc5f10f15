import ArgumentParser
import MQTTKit
import ProximityTrust

/// How a fleet client reaches the broker: `proximity-fleet`'s and `proximityctl fleet`'s options.
public struct BrokerOptions: ParsableArguments, Sendable {
    @Option(help: ArgumentHelp("The broker: mqtt://HOST[:PORT] or mqtts://HOST[:PORT].", valueName: "url"))
    public var broker: String

    @Option(help: ArgumentHelp("The user name on the broker.", valueName: "name"))
    public var username: String?

    @Option(name: .customLong("password-file"),
            help: ArgumentHelp("A file whose first line is the password: a regular file, mode 0600, owned by root or by the user " +
                               "this runs as.", valueName: "file"))
    public var passwordFile: String?

    @Option(name: .customLong("ca-file"), help: ArgumentHelp("PEM file of the broker's CA (mqtts://). Default: the system's CAs.",
                                                             valueName: "file"))
    public var caFile: String?

    public init() {}

    public func validate() throws {
        do { _ = try MQTTBrokerURL.parse(broker) } catch { throw ValidationError("--broker: \(error.message)") }
    }

    /// The client's options, with `clientID`; throws ``SecretFileError`` when the password file
    /// cannot be read or is not kept as a secret (``SecretFile``).
    public func options(clientID: String, reconnectDelay: ClosedRange<Int> = 1...60) throws -> MQTTOptions {
        let url = try MQTTBrokerURL.parse(broker)
        var options = MQTTOptions(host: url.host, port: url.port, clientID: clientID, username: username,
                                  password: try passwordFile.map { (path: String) throws(SecretFileError) -> String in
                                      try SecretFile.password(path: path)
                                  },
                                  reconnectDelay: reconnectDelay)
        if url.tls { options.tls = .init(caFile: caFile, caPath: caFile == nil ? MQTTOptions.TLS.systemCAPath : nil) }
        return options
    }
}
