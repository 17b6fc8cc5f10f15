// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "proximityd",
    products: [
        .executable(name: "proximityd", targets: ["proximityd"]),
        .executable(name: "proximityctl", targets: ["proximityctl"]),
        .executable(name: "dbuskit-bench", targets: ["dbuskit-bench"]),
        .executable(name: "bluez-sim", targets: ["bluez-sim"]),
        .executable(name: "ranging-bench", targets: ["ranging-bench"]),
        .executable(name: "fleet-bench", targets: ["fleet-bench"]),
        .executable(name: "fleet-load", targets: ["fleet-load"]),
        .executable(name: "region-bench", targets: ["region-bench"]),
        .library(name: "DBusKit", targets: ["DBusKit"]),
        .library(name: "MQTTKit", targets: ["MQTTKit"]),
        .executable(name: "proximity-fleet", targets: ["proximity-fleet"]),
        .library(name: "ProximityTesting", targets: ["ProximityTesting"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
    ],
    targets: [
        // libdbus-1, reached only through DBusKit.
        .systemLibrary(
            name: "CDBus",
            pkgConfig: "dbus-1",
            providers: [.apt(["libdbus-1-dev"])]
        ),
        // libmosquitto, reached only through MQTTKit.
        .systemLibrary(
            name: "CMosquitto",
            pkgConfig: "libmosquitto",
            providers: [.apt(["libmosquitto-dev"])]
        ),
        // libbluetooth, for proximityctl doctor's kernel-level checks.
        .systemLibrary(
            name: "CBluetooth",
            pkgConfig: "bluez",
            providers: [.apt(["libbluetooth-dev"])]
        ),
        // zlib, for the test kit's PNG reader (a headless browser's screenshots); only
        // ProximityTesting imports it.
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        // glibc's mallopt and malloc_trim (<malloc.h>), for the daemon's SystemAllocator.
        .systemLibrary(name: "CMalloc"),
        .target(
            name: "DBusKit",
            dependencies: ["CDBus", .product(name: "Logging", package: "swift-log")]
        ),
        // An MQTT client on libmosquitto: connections, QoS 1 publishing, subscriptions, wills, TLS.
        .target(
            name: "MQTTKit",
            dependencies: ["CMosquitto", .product(name: "Logging", package: "swift-log")]
        ),
        // A typed client of org.bluez, and the objects a node exports to BlueZ.
        .target(
            name: "BlueZ",
            dependencies: ["DBusKit", .product(name: "Logging", package: "swift-log")]
        ),
        // The pure domain: no I/O, time passed in.
        .target(name: "ProximityCore"),
        // libcrypto (OpenSSL 3), reached only through LibCrypto.
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        // The trusted fleet's cryptography on libcrypto's primitives: the fleet key, the trusted
        // identification's messages, identity resolving keys (ah). No I/O.
        // libcrypto's handles, each owned by the type that names it, and the Bluetooth `ah`
        // function made of them (IdentityResolvingKey): for the node's trust and the simulator's phones.
        .target(name: "LibCrypto", dependencies: ["COpenSSL"]),
        .target(name: "ProximityTrust", dependencies: ["LibCrypto", "ProximityCore"]),
        // posix_spawn(3) as a shell would, for proximityctl's children and the test kit's.
        .target(name: "ChildProcess"),
        // The release version, generated from the VERSION file (the one place it is written).
        .target(name: "ProximityVersion", plugins: ["VersionFile"]),
        .plugin(name: "VersionFile", capability: .buildTool(), dependencies: ["version-source"]),
        .executableTarget(name: "version-source", path: "Tools/version-source"),
        .target(
            name: "ProximityNode",
            dependencies: [
                "DBusKit", "BlueZ", "ProximityCore", "ProximityAPI", "ProximityAPIValues", "MQTTKit", "ProximityMQTT", "ProximityTrust",
                "CMalloc",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                "StrictYAML",
            ]
        ),
        // The strict YAML tree with positions (FILE:LINE:COLUMN), duplicate keys kept for the
        // reader to report, and the size, depth and alias limits: the config file's and the
        // simulator's scenarios'.
        .target(
            name: "StrictYAML",
            dependencies: [.product(name: "Yams", package: "Yams")]
        ),
        // The fleet service: each device's room from every node's MQTT reports.
        .target(
            name: "ProximityFleet",
            dependencies: [
                "MQTTKit", "ProximityCore", "ProximityMQTT", "StrictYAML",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // proximityd's and proximity-fleet's MQTT topics and payloads, as Codable types: written by
        // the node and the fleet service, read by the fleet service, proximityctl fleet and the tests.
        .target(name: "ProximityMQTT", dependencies: ["ProximityCore"]),
        // Command-line options the executables share (the broker's, for proximity-fleet and
        // proximityctl fleet): declared once, outside the libraries.
        .target(
            name: "ProximityCommandLine",
            dependencies: [
                "MQTTKit", "ProximityTrust",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // The fleet's live map: a read-only web page and JSON API (Hummingbird), fed by the fleet
        // service's views.
        .target(
            name: "FleetMap",
            dependencies: [
                "ProximityFleet", "ProximityMQTT",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "proximity-fleet",
            dependencies: [
                "ProximityFleet", "FleetMap", "ProximityCommandLine", "MQTTKit", "ProximityMQTT", "ProximityCore", "ProximityVersion",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "proximityd",
            dependencies: [
                "ProximityNode", "DBusKit", "ProximityVersion", "ProximityCommandLine",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // What the node's API carries, as values with no bus: alert properties, the event log's
        // entries, the profile's signals, recorded samples, limits. The pure step emits them.
        .target(name: "ProximityAPIValues", dependencies: ["ProximityCore"]),
        // What the daemon and its clients share: the names of the node's D-Bus API, the values on
        // the bus, typed properties, client proxies. Re-exports ProximityAPIValues.
        .target(
            name: "ProximityAPI",
            dependencies: ["DBusKit", "ProximityCore", "ProximityAPIValues"]
        ),
        // proximityctl doctor's checks; the only Swift code that sees libbluetooth.
        .target(
            name: "ProximityDiagnostics",
            dependencies: ["ProximityAPI", "BlueZ", "DBusKit", "CBluetooth"]
        ),
        .executableTarget(
            name: "proximityctl",
            dependencies: [
                "ProximityAPI", "ProximityDiagnostics", "DBusKit", "ProximityCore", "MQTTKit", "ProximityMQTT", "ProximityCommandLine", "ProximityVersion",
                "ProximityTrust", "ChildProcess", "BlueZ",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .executableTarget(
            name: "fleet-load",
            dependencies: [
                "MQTTKit", "ProximityTesting", "ProximityCore", "ProximityMQTT",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/fleet-load"
        ),
        .executableTarget(
            name: "ranging-bench",
            dependencies: [
                "ProximityCore", "BlueZSim", "ProximityBenchmarking", "ProximityFleet",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/ranging-bench"
        ),
        // What the benchmarks share: radio conditions, the air's sampling of a walker or device
        // (bluez-sim's RadioModel.receive), the node as a pipeline, and the tables' cells.
        .target(
            name: "ProximityBenchmarking",
            dependencies: ["ProximityCore", "BlueZSim"],
            path: "Tools/ProximityBenchmarking"
        ),
        // Room decision: bounces while standing still and lag after a move, the fleet's rule
        // against room-assistant's and Bermuda's, on bluez-sim's radio model.
        .executableTarget(
            name: "fleet-bench",
            dependencies: [
                "ProximityCore", "BlueZSim", "ProximityBenchmarking",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/fleet-bench"
        ),
        // The region monitor's cost per report and memory per region, against a naive monitor.
        .executableTarget(
            name: "region-bench",
            dependencies: [
                "ProximityCore", "BlueZSim",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/region-bench"
        ),
        .executableTarget(
            name: "dbuskit-bench",
            dependencies: [
                "DBusKit", "ProximityTesting",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            path: "Tools/dbuskit-bench"
        ),
        // The test kit: private buses, child processes, signals, a test broker, bluez-sim's
        // boxes. No node: bluez-sim and the benchmarks link it.
        .target(
            name: "ProximityTesting",
            dependencies: [
                "DBusKit", "ChildProcess",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The test kit's simulator layer: bluez-sim's boxes on private buses (SimBoxes), bleak.
        .target(name: "SimTesting", dependencies: ["ProximityTesting", "BlueZSim", "DBusKit", .product(name: "Logging", package: "swift-log")]),
        // The test kit's browser layer: headless Chromium over the DevTools protocol, a PNG reader
        // for its screenshots (zlib).
        .target(name: "BrowserTesting", dependencies: ["ProximityTesting", "CZlib", "ChildProcess"]),
        // What proximityctl's tests talk to: a real sshd on 127.0.0.1, a notification server
        // (dunst on Xvfb).
        .target(name: "ClientTesting", dependencies: ["ProximityTesting", "DBusKit"]),
        // A node on bluez-sim's boxes for the tests, in this process or as a proximityd process.
        .target(
            name: "NodeTesting",
            dependencies: [
                "ProximityTesting", "SimTesting", "ProximityNode", "ProximityCore", "BlueZSim", "DBusKit",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        // The BlueZ simulator: the air between boxes and "bluetoothd" on each box's bus.
        .target(
            name: "BlueZSim",
            dependencies: [
                "BlueZ", "DBusKit", "StrictYAML", "LibCrypto",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tools/BlueZSim"
        ),
        .executableTarget(
            name: "bluez-sim",
            dependencies: [
                "BlueZSim", "DBusKit", "ProximityTesting", "SimTesting", "ProximityVersion", "LibCrypto",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            path: "Tools/bluez-sim"
        ),
        .testTarget(
            name: "DBusKitTests",
            dependencies: ["DBusKit", "ProximityTesting"]
        ),
        .testTarget(
            name: "BlueZTests",
            dependencies: ["SimTesting", "BlueZ", "BlueZSim", "DBusKit", "ProximityTesting"]
        ),
        .testTarget(
            name: "ProximityTestingTests",
            dependencies: ["BrowserTesting", "ProximityTesting"]
        ),
        .testTarget(
            name: "FleetMapTests",
            dependencies: ["BrowserTesting", "SimTesting", "FleetMap", "ProximityFleet", "ProximityCore", "ProximityMQTT", "ProximityTesting", "NodeTesting", "MQTTKit", "BlueZSim",
                           "ProximityBenchmarking",
                           // The map's routes in process, no socket (FleetMapHTTPTests.withRouter).
                           .product(name: "Hummingbird", package: "hummingbird"),
                           .product(name: "HummingbirdTesting", package: "hummingbird")]
        ),
        .testTarget(
            name: "ProximityCoreTests",
            dependencies: ["ProximityCore"]
        ),
        .testTarget(
            name: "ProximityTrustTests",
            dependencies: ["ProximityTrust", "ProximityTesting"]
        ),
        .testTarget(
            name: "ProximityFleetTests",
            dependencies: ["ProximityFleet", "ProximityCore", "ProximityMQTT", "MQTTKit", "ProximityTesting", "BlueZSim", "ProximityBenchmarking",
                           .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(
            name: "BlueZSimTests",
            dependencies: ["SimTesting", "BlueZSim", "DBusKit", "ProximityTesting", "ProximityTrust"]
        ),
        .testTarget(
            name: "MQTTKitTests",
            dependencies: ["MQTTKit", "ProximityTesting"]
        ),
        .testTarget(
            name: "ProximityNodeTests",
            dependencies: ["SimTesting", "ProximityNode", "StrictYAML", "ProximityCore", "DBusKit", "ProximityTesting", "NodeTesting", "BlueZSim", "ProximityMQTT", "ProximityTrust"]
        ),
        .testTarget(
            name: "ProximitydTests",
            dependencies: ["ClientTesting", "SimTesting", "DBusKit", "ProximityNode", "ProximityTesting", "NodeTesting", "BlueZSim", "ProximityAPI", "MQTTKit", "ProximityMQTT",
                           "ProximityTrust"]
        ),
    ]
)
