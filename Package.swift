// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "proximityd",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "proximityd", targets: ["proximityd"]),
        .executable(name: "proximityctl", targets: ["proximityctl"]),
        .executable(name: "dbuskit-bench", targets: ["dbuskit-bench"]),
        .library(name: "DBusKit", targets: ["DBusKit"]),
        .library(name: "ProximityTesting", targets: ["ProximityTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        // libdbus-1, reached only through DBusKit.
        .systemLibrary(
            name: "CDBus",
            pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]
        ),
        .target(
            name: "DBusKit",
            dependencies: ["CDBus", .product(name: "Logging", package: "swift-log")]
        ),
        .target(
            name: "ProximityNode",
            dependencies: [
                "DBusKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "proximityd",
            dependencies: [
                "ProximityNode", "DBusKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "proximityctl",
            dependencies: [
                "ProximityNode", "DBusKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "dbuskit-bench",
            dependencies: [
                "DBusKit", "ProximityTesting",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .target(
            name: "ProximityTesting",
            dependencies: ["DBusKit"]
        ),
        .testTarget(
            name: "DBusKitTests",
            dependencies: ["DBusKit", "ProximityTesting"]
        ),
        .testTarget(
            name: "ProximitydTests",
            dependencies: ["DBusKit", "ProximityNode", "ProximityTesting"]
        ),
    ]
)
