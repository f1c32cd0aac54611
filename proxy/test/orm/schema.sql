-- The tables of every ORM application (run through the proxy): patient with
-- encrypted columns at every level, patient_plain its plaintext twin.
SELECT pgcipher.add_column_key('k1');
CREATE TABLE ward (id serial PRIMARY KEY, name varchar(60) NOT NULL);
CREATE TABLE patient (
    id serial PRIMARY KEY,
    city enc_text NOT NULL,
    name enc_text NOT NULL,
    ssn enc_text NOT NULL UNIQUE,
    born enc_date_ord NOT NULL,
    balance enc_numeric_ord NOT NULL,
    visits enc_int4_ord NOT NULL,
    notes enc_text,
    active boolean NOT NULL,
    ward_id int REFERENCES ward);
SELECT pgcipher.encrypt_column('patient', 'city', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('patient', 'name', 'k1', 'MATCH', case_insensitive => true);
SELECT pgcipher.encrypt_column('patient', 'ssn', 'k1', 'EQ');
SELECT pgcipher.encrypt_column('patient', 'born', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('patient', 'balance', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('patient', 'visits', 'k1', 'ORD');
SELECT pgcipher.encrypt_column('patient', 'notes', 'k1', 'RND');
CREATE TABLE patient_plain (
    id serial PRIMARY KEY,
    city text COLLATE "C" NOT NULL,
    name text COLLATE "C" NOT NULL,
    ssn text COLLATE "C" NOT NULL UNIQUE,
    born date NOT NULL,
    balance numeric NOT NULL,
    visits int NOT NULL,
    notes text COLLATE "C",
    active boolean NOT NULL,
    ward_id int REFERENCES ward);
