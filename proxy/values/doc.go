// Package values converts plaintext values between the forms a client
// uses on the wire (text or binary, of the type it declared) and the
// payloads of package colcrypt: parameters on their way to encryption,
// and decrypted values on their way back in the format the client asked
// for.  Binary forms are read and written with pgx's pgtype where they
// are not the payload itself.
package values
