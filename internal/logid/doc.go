// Package logid shortens identifiers that logs at INFO level and above must not carry in the
// clear: a connection id is a bearer of the user's conversation (whoever knows it could post
// events as that connection on an unprotected webhook listener), so logs name it by a short
// hash. DEBUG logs may keep the id itself.
package logid
