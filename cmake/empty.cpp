// Keeps an object library non-empty while its folder has no sources yet.
