import OTBase

/// How long connection data (and a token's initial layout class list) may be: at most
/// `ClientToken.maxDataCharacters` Unicode scalars, so never more than four times that in UTF-8 bytes whatever
/// characters are used (graphemes are not counted: one can hold any number of scalars).
public enum ConnectionDataRules {
    public static func isValid(_ s: String) -> Bool {
        s.utf8.count <= ClientToken.maxDataCharacters || s.unicodeScalars.count <= ClientToken.maxDataCharacters
            && s.utf8.count <= 4 * ClientToken.maxDataCharacters
    }
}
