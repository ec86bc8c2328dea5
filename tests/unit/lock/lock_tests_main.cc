#define BOOST_TEST_MODULE lock_unit_tests
#include <boost/test/unit_test.hpp>
