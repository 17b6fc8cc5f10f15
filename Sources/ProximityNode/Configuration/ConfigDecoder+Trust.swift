/// `fleet-key:` and `accept-unverified:`.
extension ConfigDecoder {
    /// `fleet-key: FILE`: an absolute path; the file itself is read by ``ConfigFile/parse(_:path:)``
    /// (``FleetKeyFile``), its problems reported at this value.
    mutating func decodeFleetKey(_ entry: ConfigEntry) {
        guard !isNull(entry.value) else { return }
        fleetKeyFile = text(entry, path: "fleet-key") { (path: String) throws(OptionProblem) -> String in
            guard path.hasPrefix("/") else { throw OptionProblem("must be an absolute path, not '\(path)'") }
            return path
        }
        if fleetKeyFile != nil { fleetKeyPosition = entry.value.position }
    }

    mutating func decodeAcceptUnverified(_ entry: ConfigEntry) {
        if let value = boolean(entry, path: "accept-unverified") { trust.acceptUnverified = value }
    }
}
