-- catalog-rebuild catalog schema, migration 10 (additive): file names that are not UTF-8.
--
-- A director catalog in a SQL_ASCII database can hold path and file names whose bytes are not
-- valid UTF-8. The source sends such a name as its exact bytes (path_bytes / name_bytes); the
-- catalog decodes them from the source's legacy encoding with this function, which returns NULL
-- instead of failing when a byte is not defined in that encoding (WIN1252 leaves 0x81, 0x8D,
-- 0x8F, 0x90 and 0x9D undefined): that record alone is then quarantined. It catches an error, so
-- it runs in a subtransaction and is PARALLEL UNSAFE; it is called only for names that are not UTF-8.
CREATE OR REPLACE FUNCTION catalog_decode_legacy(b bytea, encoding text) RETURNS text
LANGUAGE plpgsql STABLE PARALLEL UNSAFE AS $$
BEGIN
  RETURN convert_from(b, encoding);
EXCEPTION WHEN character_not_in_repertoire OR untranslatable_character OR invalid_parameter_value
               OR undefined_function THEN
  RETURN NULL;
END
$$;
