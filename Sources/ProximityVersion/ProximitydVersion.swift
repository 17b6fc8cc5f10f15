/// The release version of proximityd, proximityctl and proximity-fleet: what their `--version`
/// prints and the Debian package's version. It is written in one place, the repository's VERSION
/// file; the VersionFile build plugin generates `string` from it (Plugins/VersionFile).
public enum ProximitydVersion {}
