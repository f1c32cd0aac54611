// Package values converts plaintext values between the forms a client
// uses on the wire (text or binary, of the type it declared) and the
// payloads of package colcrypt: parameters on their way to encryption,
// and decrypted values on their way back in the format the client asked
// for.  Binary forms are read and written with pgx's pgtype where they
// are not the payload itself.
//
// Payload turns a Bind parameter (text or binary, of the type the client
// declared) and Encode a literal's text into the payload that a
// colcrypt.Column encrypts; Result turns a decrypted payload into the
// bytes of a DataRow field; PlainOID, PlainLen and PlainType map an
// encrypted type to the plaintext type the client is shown, and back.
// Packages rewrite and wire call these; package compute works on the same
// payloads but has its own typed values.
package values
