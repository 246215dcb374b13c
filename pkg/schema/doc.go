// Package schema checks the input a model produced for a tool call against
// the tool's JSON Schema, and words every failure the way Claude Code does,
// because Claude models are trained on those messages and fix their calls
// from them.
//
// It supports the part of JSON Schema that tool input schemas use: type
// (object, string, number, integer, boolean, array, null), properties,
// required, additionalProperties: false, enum, minimum, maximum,
// exclusiveMinimum, exclusiveMaximum, items and default. A property with a
// default may be left out even when it is listed as required, as Claude
// Code allows. Defaults are not filled in; numeric strings such as "2" given
// for number or integer properties are turned into numbers.
//
// The error texts follow Claude Code's validator output: missing,
// unexpected and wrongly typed parameters are listed one per line after
// "<Tool> failed due to the following issue(s):"; other problems (a value
// not in an enum, a number out of range) are shown as the validator's JSON
// issue list. The executor wraps them in <tool_use_error> tags.
//
// The package does not know any tool, and does no I/O.
//
// Why one package of this size (about 1,100 lines): the validator and the
// wording of its errors are one contract with the model; a general JSON
// Schema library would not word failures the way the model expects.
package schema
