import PackagePlugin

/// Generates the release version into the target it is applied to (ProximityVersion), from the
/// package's VERSION file: the one place the version is written. `scripts/package.sh` reads the
/// same file, so `--version` of every command and the Debian package's version agree.
@main
struct VersionFilePlugin: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let versionFile = context.package.directoryURL.appending(path: "VERSION")
        let output = context.pluginWorkDirectoryURL.appending(path: "GeneratedVersion.swift")
        return [
            .buildCommand(
                displayName: "Generating the version from VERSION",
                executable: try context.tool(named: "version-source").url,
                arguments: [versionFile.path, output.path],
                inputFiles: [versionFile],
                outputFiles: [output]
            )
        ]
    }
}
