//! The encoding of the server functions that take structured arguments: JSON,
//! like server_fn's own `Json`, except that a value that does not fit names
//! where it is (`tool: invalid type: string "x", expected i64 …`), so the
//! caller learns which field to fix.

use leptos::server_fn::codec::Post;
use leptos::server_fn::{Bytes, ContentType, Decodes, Encodes, Format, FormatType};
use serde::de::DeserializeOwned;
use serde::Serialize;

/// Arguments as JSON in the body of a POST.
pub type JsonArgs = Post<ArgsEncoding>;

pub struct ArgsEncoding;

impl ContentType for ArgsEncoding {
    const CONTENT_TYPE: &'static str = "application/json";
}

impl FormatType for ArgsEncoding {
    const FORMAT_TYPE: Format = Format::Text;
}

impl<T: Serialize> Encodes<T> for ArgsEncoding {
    type Error = serde_json::Error;

    fn encode(args: &T) -> Result<Bytes, Self::Error> {
        serde_json::to_vec(args).map(Bytes::from)
    }
}

impl<T: DeserializeOwned> Decodes<T> for ArgsEncoding {
    type Error = String;

    fn decode(bytes: Bytes) -> Result<T, String> {
        let mut json = serde_json::Deserializer::from_slice(&bytes);
        let args = serde_path_to_error::deserialize(&mut json).map_err(|e| {
            let path = e.path().to_string();
            // The path of the arguments as a whole is ".": nothing to name.
            if path == "." {
                e.into_inner().to_string()
            } else {
                format!("{path}: {}", e.into_inner())
            }
        })?;
        json.end().map_err(|e| e.to_string())?;
        Ok(args)
    }
}
