import StrictYAML

// The config file is read through the strict YAML tree the simulator's scenarios share
// (StrictYAML): these are its names here.

/// A place in the config file (``YAMLPosition``).
typealias ConfigPosition = YAMLPosition
/// One thing wrong with the config file (``YAMLProblem``).
typealias ConfigProblem = YAMLProblem
/// A value of the config file with its position (``YAMLNode``).
typealias ConfigNode = YAMLNode
/// A key and its value in a mapping of the config file (``YAMLEntry``).
typealias ConfigEntry = YAMLEntry
/// The bounds a config file keeps (``YAMLLimits``); the size is ``ConfigFile/maxSize``.
typealias ConfigLimits = YAMLLimits
/// The config file's bytes as a tree (``StrictYAML``).
typealias ConfigYAML = StrictYAML
