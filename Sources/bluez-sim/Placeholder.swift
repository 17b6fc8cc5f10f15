// Placeholder so the package builds until the real `bluez-sim` command lands.
// DELETE THIS FILE when adding the command's real @main type.
@main
enum BlueZSimPlaceholder {
    static func main() {
        print("bluez-sim: not built yet")
    }
}
