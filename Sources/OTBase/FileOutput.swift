#if canImport(Glibc)
import Glibc
#endif

/// Unbuffered writes to the standard streams, safe from any thread.
public enum FileOutput {
    public static func stderr(_ text: String) {
        var copy = text
        copy.withUTF8 { buf in _ = write(2, buf.baseAddress, buf.count) }
    }
}
