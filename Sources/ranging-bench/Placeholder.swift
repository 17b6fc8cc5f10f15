// Placeholder so the package builds until the real `ranging-bench` command lands.
// DELETE THIS FILE when adding the command's real @main type.
@main
enum RangingBenchPlaceholder {
    static func main() {
        print("ranging-bench: not built yet")
    }
}
