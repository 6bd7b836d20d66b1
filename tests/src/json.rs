//! Reading JSON as Laravel writes it: the top-level fields in the order of the text.

/// The top-level fields of a JSON object, in the order they appear in the text.
///
/// ```
/// let fields = tests::json_fields(r#"{"b":1,"a":null}"#);
/// let names: Vec<&str> = fields.iter().map(|(name, _)| name.as_str()).collect();
/// assert_eq!(names, ["b", "a"]);
/// ```
pub fn json_fields(json: &str) -> Vec<(String, serde_json::Value)> {
    struct Fields(Vec<(String, serde_json::Value)>);

    impl<'de> serde::Deserialize<'de> for Fields {
        fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            struct Visitor;
            impl<'de> serde::de::Visitor<'de> for Visitor {
                type Value = Fields;
                fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                    f.write_str("a JSON object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(
                    self,
                    mut map: A,
                ) -> Result<Fields, A::Error> {
                    let mut fields = Vec::new();
                    while let Some(entry) = map.next_entry()? {
                        fields.push(entry);
                    }
                    Ok(Fields(fields))
                }
            }
            deserializer.deserialize_map(Visitor)
        }
    }

    serde_json::from_str::<Fields>(json)
        .unwrap_or_else(|err| panic!("not a JSON object ({err}): {json}"))
        .0
}
