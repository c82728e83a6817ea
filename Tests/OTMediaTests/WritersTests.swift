import XCTest
@testable import OTMedia
