/// The two token formats OpenTok clients use.
public enum TokenFormat: String, Sendable { case jwt, t1 }
